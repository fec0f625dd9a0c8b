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

    /// Records device names learnt from a remote, by durable replace, when they change
    /// anything.
    /// Read and written under the notebook lock ([PKG-83]), so names two processes learn at
    /// once are both kept.
    public func learnDeviceNames(_ names: [ReplicaID: String]) throws {
        guard !names.isEmpty else { return }
        try notebookLock.withLock {
            var all = try deviceNames()
            let before = all
            for (r, d) in names { all[r] = d }
            guard all != before else { return }
            let file = DevicesFile(format: 1, devices: all.keys.sorted().map { DevicesFile.Entry(replica: $0.description, device: all[$0]!) })
            try DurableFile.replace(devicesPath, with: try StoreJSON.encode(file), io: io)
        }
    }
}
