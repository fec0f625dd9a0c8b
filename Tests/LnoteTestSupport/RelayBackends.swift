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

    public var description: String { rawValue }
}

public enum RelayBackends {
    /// Every backend a storage test runs against. SQLite always runs; a backend that needs
    /// a server (PostgreSQL, issue 17) is to be added here when the machine can run it.
    public static var all: [RelayBackendKind] { RelayBackendKind.allCases }
}
