import LnoteModel

/// The JSON files a notebook reads, each through the very decoding and validation the store
/// applies when it opens them (`StoreJSON` then the file's own checks), for the fuzzers
/// (`lnote-fuzz`, `Sources/LnoteFuzzing`) and tests that feed them hostile bytes.
///
/// Each entry point throws what the store throws on that file (`corrupt` or
/// `unsupportedVersion` naming `path`) and, when the bytes are accepted, checks the
/// property the store relies on: what was accepted, written back by the store's encoder,
/// reads back as the same value. A value that does not survive is described by
/// `roundTripProblem`'s result, so that a fuzzer can trap on it.
public enum NotebookJSONFiles {
    /// The files, by the name a fuzz target uses.
    public enum Kind: String, CaseIterable, Sendable {
        /// `<UUID>.lnote/document.json` ([PKG-10] … [PKG-12]).
        case document = "document.json"
        /// `<UUID>.lnote/manifest.json` ([PKG-13]).
        case manifest = "manifest.json"
        /// `.lnote/replica.json` ([PKG-60]).
        case replica = "replica.json"
        /// `.lnote/devices.json`: device names learnt from a relay (a cache).
        case devices = "devices.json"
        /// `.lnote/quarantine/*.json`: operations set aside.
        case quarantine = "quarantine.json"
    }

    /// Decodes `bytes` as the store decodes file `kind`; returns a description of a broken
    /// round trip (accepted bytes whose value, re-encoded by the store and read again, differs),
    /// or nil when the bytes are rejected or survive.
    ///
    /// - Throws: what the store throws when it reads such a file.
    public static func roundTripProblem(_ kind: Kind, _ bytes: [UInt8], path: String = "fuzz.json") throws -> String? {
        switch kind {
        case .document:
            let (f, state, assets) = try DocumentFile.decode(bytes, path: path)
            let again = try StoreJSON.encode(DocumentFile(state: state, coveredOffset: f.log.offset, incarnation: f.incarnation, assets: assets))
            let (_, state2, assets2) = try DocumentFile.decode(again, path: path)
            guard state2 == state, assets2 == assets else { return "document.json state changed by a round trip" }
        case .manifest:
            let m = try ManifestFile.decode(bytes, path: path)
            guard try ManifestFile.decode(try StoreJSON.encode(m), path: path) == m else { return "manifest.json changed by a round trip" }
        case .replica:
            let r = try Notebook.ReplicaFile.decodeValidated(bytes, path: path)
            guard try Notebook.ReplicaFile.decodeValidated(try StoreJSON.encode(r.file), path: path) == r else {
                return "replica.json changed by a round trip"
            }
        case .devices:
            let names = Notebook.DevicesFile.names(bytes, path: path)
            let file = Notebook.DevicesFile(format: 1, devices: names.keys.sorted().map { .init(replica: $0.description, device: names[$0]!) })
            guard Notebook.DevicesFile.names(try StoreJSON.encode(file), path: path) == names else {
                return "devices.json names changed by a round trip"
            }
        case .quarantine:
            let e = try Quarantine.decode(bytes, path: path)
            guard try Quarantine.decode(try Quarantine.encode(e), path: path) == e else { return "quarantine entry changed by a round trip" }
        }
        return nil
    }
}

extension NotebookJSONFiles {
    /// The device names the store believes in devices.json `bytes` (empty when it is damaged).
    public static func deviceNames(_ bytes: [UInt8]) -> [ReplicaID: String] {
        Notebook.DevicesFile.names(bytes, path: "devices.json")
    }
}

extension Notebook.ReplicaFile {
    /// A replica.json that decodes and passes the store's checks, with the ids it holds.
    struct Validated: Equatable {
        var file: Notebook.ReplicaFile
        var replica: ReplicaID
        var previous: [ReplicaID]
        /// The ids of `previous` whose fork repair is unfinished (`ReplicaFile.repairing`).
        var repairing: [ReplicaID] = []
    }

    /// Decodes replica.json and checks it as every reader does ([PKG-60]): format 1, a
    /// 16-digit non-zero replica id; unreadable previous ids are dropped.
    static func decodeValidated(_ bytes: [UInt8], path: String) throws -> Validated {
        let r = try StoreJSON.decode(Notebook.ReplicaFile.self, bytes, path: path)
        if r.format > 1 {
            throw LnoteError(.unsupportedVersion, "replica.json of format \(r.format) (this build reads 1)", path: path)
        }
        guard r.format == 1 else { throw LnoteError(.corrupt, "replica.json: format \(r.format)", path: path) }
        guard r.replica.count == 16, let id = ReplicaID(hex: r.replica), id.rawValue != 0 else {
            throw LnoteError(.corrupt, "replica.json: replica is not 16 hex digits of a non-zero id", path: path)
        }
        return Validated(file: r, replica: id, previous: r.previous.compactMap { ReplicaID(hex: $0) },
                         repairing: (r.repairing ?? []).compactMap { ReplicaID(hex: $0) })
    }
}

extension Notebook.DevicesFile {
    /// The names devices.json holds that the store believes: a damaged file reads as empty
    /// (it is a cache), and only printable names of well-formed ids are kept.
    static func names(_ bytes: [UInt8], path: String) -> [ReplicaID: String] {
        guard let file = try? StoreJSON.decode(Notebook.DevicesFile.self, bytes, path: path), file.format == 1 else { return [:] }
        var out: [ReplicaID: String] = [:]
        for e in file.devices {
            // A cache another folder or a backup may have written: only printable names.
            if e.replica.count == 16, let r = ReplicaID(hex: e.replica), PrintableText.deviceNameProblem(e.device) == nil {
                out[r] = e.device
            }
        }
        return out
    }
}
