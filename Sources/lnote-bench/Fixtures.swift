#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel
import LnoteStore

enum Fixtures {
    /// Builds a notebook folder with `build` and returns where it ended up (in the
    /// workspace, on the real disk) with what `build` returned.
    ///
    /// Large fixtures are built on tmpfs when there is one (their fsyncs cost nothing there)
    /// and then copied to the workspace, so that what is measured runs on the same disk as
    /// every other case. The copy is opened under a new replica id (the folder moved), which
    /// changes nothing measured.
    @MainActor
    static func notebookFolder<T>(_ ws: Workspace, name: String,
                                  _ build: (Notebook) async throws -> T) async throws -> (path: String, value: T) {
        var o = StoreOptions()
        o.autosave = false
        let destination = try ws.directory(name) + "/notebook"
        let buildPath = ws.scratch.map { $0 + "/" + name } ?? destination
        let notebook = try await Notebook.open(at: buildPath, create: true, options: o)
        let value: T
        do {
            value = try await build(notebook)
        } catch {
            try? await notebook.close()
            throw error
        }
        try await notebook.close()
        if buildPath != destination {
            try FileManager.default.copyItem(atPath: buildPath, toPath: destination)
            try FileManager.default.removeItem(atPath: buildPath)
            // Write the copy back to disk before anything is timed on it.
            Fixtures.syncFilesystem(destination)
        }
        return (destination, value)
    }
}

extension Fixtures {
    /// Flushes the fixture just copied so that its writeback does not land inside a timed
    /// fsync. `sync()` (Glibc's module does not expose `syncfs`): one call, whole system.
    static func syncFilesystem(_ path: String) {
        sync()
    }
}
