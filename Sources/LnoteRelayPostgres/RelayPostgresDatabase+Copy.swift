import LnoteModel
import LnotePostgres
import LnoteServer

extension RelayPostgresDatabase: RelayCopyBackend {
    public var backendName: String { "postgresql" }

    public func storedRelaySchemaVersion() throws -> Int64? { try storedSchemaVersion() }

    /// The counter `allocateSequences` raises (`relay_counters` 'ops'), or the greatest
    /// sequence held if that is greater.
    public func issuedSequence(_ tx: any RelayTransaction) throws -> Int64 {
        let counter = try tx.query("SELECT value FROM relay_counters WHERE name = 'ops'").first?.first?.int64 ?? 0
        let held = try tx.query("SELECT coalesce(max(seq), 0) FROM ops").first?.first?.int64 ?? 0
        return max(counter, held)
    }

    /// Relay processes of other machines cannot be told from here (`relay_presence` says
    /// which serve the database).
    public var openedByOtherStores: Bool { false }
}
