import Foundation
import LnoteModel

/// The device names a relay gave for replica ids ([SYNC-57]), kept in `.lnote/devices.json`
/// ([PKG-65]) so that conflicts, logs and listings can say "laptop" where they would say
/// `3e7b4267314d0870`. A cache: names only, never a source of truth; learning a name for a
/// replica replaces the one known before.
extension Notebook {
    struct DevicesFile: Codable, Equatable {
        struct Entry: Codable, Equatable {
            var replica: String
            var device: String
        }
        var format: Int
        var devices: [Entry]
    }

    var devicesPath: String { DurableFile.join(path, ".lnote/devices.json") }

    /// The device name of each replica id a relay has named; empty when none is known. A
    /// damaged file reads as empty (it is a cache).
    public func deviceNames() throws -> [ReplicaID: String] {
        guard let bytes = try DurableFile.readIfExists(devicesPath, io: io) else { return [:] }
        return DevicesFile.names(bytes, path: devicesPath)
    }

    /// Names this folder's own replica (`lnote init --name`, `lnote name`): shown beside its
    /// replica id here and given to the folders that sync with this one ([PKG-65]).
    /// - Throws: `invalidArgument` for a name that is not printable ([SYNC-57]).
    public func nameThisMachine(_ name: String) throws {
        if let problem = PrintableText.deviceNameProblem(name) { throw LnoteError(.invalidArgument, problem) }
        try learnDeviceNames([replica: name])
    }

    /// This folder's own replica's name, or nil.
    public func machineName() throws -> String? { try deviceNames()[replica] }

    /// Records device names learnt from a remote, by durable replace, when they change
    /// anything.
    /// Read and written under the notebook lock ([PKG-83]), so names two processes learn at
    /// once are both kept.
    public func learnDeviceNames(_ names: [ReplicaID: String]) throws {
        guard !names.isEmpty else { return }
        try notebookLock.withLock {
            var all = try deviceNames()
            let before = all
            // The rule every door applies ([PKG-65]): only printable names.
            for (r, d) in names where PrintableText.deviceNameProblem(d) == nil { all[r] = d }
            guard all != before else { return }
            let file = DevicesFile(format: 1, devices: all.keys.sorted().map { DevicesFile.Entry(replica: $0.description, device: all[$0]!) })
            try DurableFile.replace(devicesPath, with: try StoreJSON.encode(file), io: io)
        }
    }
}
