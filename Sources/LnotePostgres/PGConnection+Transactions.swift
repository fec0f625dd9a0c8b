import CLnotePQ

/// `BEGIN ISOLATION LEVEL ...`.
public enum PGIsolation: String, Sendable, CaseIterable {
    case readCommitted = "READ COMMITTED"
    case repeatableRead = "REPEATABLE READ"
    case serializable = "SERIALIZABLE"
}

extension PGConnection {
    /// Runs `body` in a transaction: `BEGIN` at `isolation` (`READ ONLY` when `readOnly`),
    /// `COMMIT` when it returns, `ROLLBACK` when it throws (the error is rethrown).
    ///
    /// A serialization failure or deadlock (SQLSTATE 40001, 40P01), whether from a
    /// statement in `body` or from `COMMIT`, throws `PGError(.serializationFailure)`:
    /// nothing was kept and the caller may run the work again. With `maxAttempts` above 1
    /// this method does so itself, so `body` must then be safe to run more than once (no
    /// side effects outside the database). The connection's lock is held for the whole
    /// call: other threads' calls on this connection wait. Nesting is not supported.
    /// - Throws: what `body` throws; `PGError(.invalidState)` when a transaction is already
    ///   open, or when `body` caught a statement error (the server then aborts the whole
    ///   transaction, which is rolled back rather than committing nothing silently).
    ///
    /// `prelude` (statements separated by `;`, no parameters) is sent with `BEGIN` in one
    /// round trip and runs before the body: settings (`SET LOCAL …`) or locks (`LOCK TABLE
    /// …`). Utility statements like these take no snapshot, so at `REPEATABLE READ` and
    /// `SERIALIZABLE` the transaction's snapshot is still taken by the body's first query,
    /// after the prelude's locks were granted.
    @discardableResult
    public func transaction<T>(_ isolation: PGIsolation = .readCommitted, readOnly: Bool = false, maxAttempts: Int = 1,
                               prelude: String? = nil, _ body: () throws -> T) throws -> T {
        guard maxAttempts >= 1 else {
            throw PGError(.invalidArgument, "maxAttempts must be at least 1, not \(maxAttempts)")
        }
        return try locked {
            var attempt = 1
            while true {
                do {
                    return try transactionOnce(isolation, readOnly: readOnly, prelude: prelude, body)
                } catch let e as PGError where e.isSerializationFailure && attempt < maxAttempts {
                    attempt += 1
                }
            }
        }
    }

    /// Whether a transaction is open (possibly aborted) on this connection.
    public var isInTransaction: Bool {
        (try? withHandle { PQtransactionStatus($0) != PQTRANS_IDLE }) ?? false
    }

    private func transactionOnce<T>(_ isolation: PGIsolation, readOnly: Bool, prelude: String?,
                                    _ body: () throws -> T) throws -> T {
        let status = try withHandle { PQtransactionStatus($0) }
        guard status == PQTRANS_IDLE else {
            throw PGError(.invalidState, "a transaction is already open on this connection (nesting is not supported)",
                          context: description)
        }
        let begin = "BEGIN ISOLATION LEVEL \(isolation.rawValue)" + (readOnly ? " READ ONLY" : "")
        let result: T
        do {
            if let prelude {
                // One simple-protocol message: BEGIN, then the prelude, inside the transaction.
                try executeScript(begin + "; " + prelude)
            } else {
                try execute(begin)
            }
            result = try body()
        } catch {
            rollbackIfOpen()
            throw error
        }
        let after = try withHandle { PQtransactionStatus($0) }
        if after == PQTRANS_INERROR {
            rollbackIfOpen()
            throw PGError(.invalidState,
                          "a statement failed inside the transaction and the body went on; the transaction was rolled back",
                          context: description)
        }
        guard after == PQTRANS_INTRANS else {
            throw PGError(.invalidState, "the body ended the transaction itself", context: description)
        }
        do {
            let commit = try execute("COMMIT")
            // COMMIT of an aborted transaction "succeeds" with the tag ROLLBACK.
            if commit.commandTag == "ROLLBACK" {
                throw PGError(.invalidState, "the server rolled the transaction back at COMMIT", context: description)
            }
        } catch {
            rollbackIfOpen()
            throw error
        }
        return result
    }

    /// Rolls back an open transaction, keeping the caller's error: a failure here (the
    /// connection is gone) leaves nothing to undo on the server.
    private func rollbackIfOpen() {
        let open = (try? withHandle { PQstatus($0) == CONNECTION_OK && PQtransactionStatus($0) != PQTRANS_IDLE }) ?? false
        if open { _ = try? execute("ROLLBACK") }
    }
}
