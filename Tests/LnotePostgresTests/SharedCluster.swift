import Dispatch
import LnotePostgres
import LnoteTestSupport
import Testing

/// One PostgreSQL cluster for a whole suite: started before its first test, stopped and
/// removed after its last (also when tests fail). Tests reach it through `current` and
/// keep apart by using their own table and channel names.
struct SharedCluster: SuiteTrait, TestScoping {
    @TaskLocal static var current: PostgresCluster?

    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        let cluster = try await PostgresCluster.start()
        do {
            try await Self.$current.withValue(cluster) { try await function() }
        } catch {
            await cluster.remove()
            throw error
        }
        await cluster.remove()
    }

    /// The suite's cluster; a test outside such a suite fails here.
    static func url() throws -> String {
        guard let cluster = current else {
            throw PGError(.invalidState, "test runs outside a suite with the .postgresCluster trait")
        }
        return cluster.url
    }
}

extension Trait where Self == SharedCluster {
    /// Starts one throwaway PostgreSQL cluster for the suite.
    static var postgresCluster: SharedCluster { SharedCluster() }
}

/// Runs blocking work (libpq calls, thread fan-outs) on a dispatch thread, off Swift
/// concurrency's shared threads.
func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}

/// The `PGError` a call throws, or nil (with a recorded issue) when it throws something
/// else or nothing.
func pgError(_ sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> PGError? {
    do {
        try body()
        Issue.record("expected a PGError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let e as PGError {
        return e
    } catch {
        Issue.record("expected a PGError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
