/// A storage backend of the relay (`RelayDatabase` in LnoteServer) that the relay's tests
/// run against: "one suite, several backends". A test about storage semantics takes one as
/// its argument (`@Test(arguments: RelayBackends.all)`) and opens its store through the
/// test target's factory (`RelayBackendKind.database(in:)` in `LnoteRelayTests`).
///
/// This target depends on no lnote module (its dependencies are fixed in `Package.swift`),
/// so it names the backends and what they need from the machine; each test target maps a
/// name to a `RelayStore`.
public enum RelayBackendKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// `RelaySQLiteDatabase`: one file in the test's temporary directory.
    case sqlite
    /// `RelayPostgresDatabase`: a database of its own (`CREATE DATABASE`) in the test
    /// process's cluster (`PostgresCluster.shared()`), dropped when the test ends. When
    /// PostgreSQL cannot be started, the test fails with the cluster's reason.
    case postgres

    public var description: String { rawValue }
}

public enum RelayBackends {
    /// Every backend a storage test runs against: SQLite and PostgreSQL, always (a machine
    /// without PostgreSQL fails the PostgreSQL cases, saying how to install it).
    public static var all: [RelayBackendKind] { RelayBackendKind.allCases }
}
