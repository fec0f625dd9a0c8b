import LnoteModel

/// A replica id of a notebook and the device that owns it ([SYNC-57]).
public struct ReplicaOwner: Sendable, Equatable {
    public var replica: ReplicaID
    public var device: String
    /// When the device first pushed its own operation, milliseconds since 1970.
    public var since: Int64
    public init(replica: ReplicaID, device: String, since: Int64) {
        self.replica = replica
        self.device = device
        self.since = since
    }
}

/// Owners of replica ids ([SYNC-57]): a replica id is owned, per notebook, by the first
/// device that pushed an operation authored under it in a request carrying that replica
/// id (a replica pushing its own work). A push holding an operation the relay does not
/// hold byte for byte, authored under a replica another device owns, is refused whole.
extension RelayStore {
    /// The owners of the notebook's replica ids, sorted by replica id.
    /// - Throws: `.notFound` for an unknown notebook.
    public func owners(notebook: NotebookID) throws -> [ReplicaOwner] {
        try database.transaction(.read) { tx in
            let (nb, _) = try row(of: notebook, tx)
            return try tx.query("SELECT replica, device, since FROM owners WHERE nb = ?1", [.integer(nb)]).map { r in
                guard let rep = r[0].int64, let device = r[1].string else {
                    throw LnoteError(.corrupt, "malformed owner row in the relay store", path: path)
                }
                return ReplicaOwner(replica: ReplicaID(UInt64(bitPattern: rep)), device: device, since: r[2].int64 ?? 0)
            }
            .sorted { $0.replica < $1.replica }
        }
    }

    /// Looks owners up, each replica once per write.
    final class OwnerCache {
        let query: any RelayStatement
        let nb: Int64
        var known: [ReplicaID: String?] = [:]

        init(_ tx: any RelayTransaction, nb: Int64) throws {
            query = try tx.prepare("SELECT device FROM owners WHERE nb = ?1 AND replica = ?2")
            self.nb = nb
        }

        func owner(of replica: ReplicaID) throws -> String? {
            if let k = known[replica] { return k }
            let device = try query.first([.integer(nb), .integer(Int64(bitPattern: replica.rawValue))])?[0].string
            known[replica] = .some(device)
            return device
        }
    }

    /// Records `device` as the owner of `replica` unless the replica has one (the key
    /// decides when two processes claim it at once).
    func claim(_ replica: ReplicaID, by device: String, nb: Int64, _ tx: any RelayTransaction) throws {
        try tx.execute("INSERT INTO owners (nb, replica, device, since) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                       [.integer(nb), .integer(Int64(bitPattern: replica.rawValue)), .text(device), .integer(Self.now())])
    }
}
