import Synchronization
import LnoteModel

/// Progress of a running sync, for a progress line or an app's indicator.
///
/// Told at each phase, while an answer arrives (the bytes, from the HTTP client's transfer
/// progress), and as documents are installed from checkpoints or stored from a pull.
public struct SyncProgress: Sendable, Equatable {
    public enum Phase: String, Sendable {
        case comparing, uploadingAssets, exchanging, downloadingAssets, applying, done
        /// A newcomer fetching the remote's checkpoints, and installing them ([SYNC-59]).
        case fetchingCheckpoints, installingCheckpoints
    }
    public var phase: Phase
    public var opsSent: Int
    public var opsReceived: Int
    /// Bytes sent and received since the sync began, the transfer in flight included.
    public var bytesSent: Int
    public var bytesReceived: Int
    /// The body of the answer in flight: bytes so far, and its length when the server said
    /// (0: not known, or no transfer in flight).
    public var receiving = 0
    public var receivingTotal = 0
    /// Documents handled so far of `documentsTotal` in the current step: installed from
    /// checkpoints (`installingCheckpoints`), or whose received operations were stored
    /// (`applying`). 0 of 0 in other phases.
    public var documentsDone = 0
    public var documentsTotal = 0
    /// Operations the pages installed so far hold (`SyncReport.opsFromCheckpoints`).
    public var opsFromCheckpoints = 0

    public init(phase: Phase, opsSent: Int = 0, opsReceived: Int = 0, bytesSent: Int = 0, bytesReceived: Int = 0) {
        self.phase = phase
        self.opsSent = opsSent
        self.opsReceived = opsReceived
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
    }
}

/// What a sync tells its progress handler: the phase and counts as the session goes
/// (`callAsFunction`, `documents`), and the bytes of each transfer as they arrive
/// (`LiveProgress.transfer`, from the remote's transfer observer, on the transfer's thread).
/// `live` nil: nobody listens, and nothing is computed.
struct Tell: Sendable {
    let live: LiveProgress?
    init(_ live: LiveProgress?) { self.live = live }

    /// The phase and the report's counts (the documents step ends).
    func callAsFunction(_ phase: SyncProgress.Phase, _ r: SyncReport) {
        live?.update(r) { p in
            p.phase = phase
            p.documentsDone = 0
            p.documentsTotal = 0
        }
    }

    /// `done` of `total` documents handled in `phase`.
    func documents(_ phase: SyncProgress.Phase, _ done: Int, of total: Int, _ r: SyncReport) {
        live?.update(r) { p in
            p.phase = phase
            p.documentsDone = done
            p.documentsTotal = total
        }
    }
}

/// The progress last told, shared between the session and the remote's transfer thread.
final class LiveProgress: Sendable {
    private let state: Mutex<SyncProgress>
    private let handler: @Sendable (SyncProgress) -> Void
    private let remote: any SyncRemote
    private let start: (sent: Int, received: Int)

    init(remote: any SyncRemote, start: (sent: Int, received: Int), handler: @escaping @Sendable (SyncProgress) -> Void) {
        self.remote = remote
        self.start = start
        self.handler = handler
        state = Mutex(SyncProgress(phase: .comparing))
    }

    /// Applies `change`, takes the counts of `r` and the bytes of
    /// finished exchanges, and tells the handler. The handler runs under the lock, so that
    /// it sees the session's and the transfer thread's news in the order they were made.
    func update(_ r: SyncReport, _ change: (inout SyncProgress) -> Void) {
        let t = remote.traffic
        state.withLock { p in
            change(&p)
            p.opsSent = r.opsSent
            p.opsReceived = r.opsReceived
            p.opsFromCheckpoints = r.opsFromCheckpoints
            // Never backwards: a transfer in flight may have told more than a finished one counts.
            p.bytesSent = max(p.bytesSent, t.sent - start.sent)
            p.bytesReceived = max(p.bytesReceived, t.received - start.received)
            p.receiving = 0
            p.receivingTotal = 0
            handler(p)
        }
    }

    /// Bytes of the transfer in flight (`SyncRemote.observeTransfers`).
    func transfer(_ t: TransferProgress) {
        state.withLock { p in
            p.bytesSent = max(p.bytesSent, t.sent - start.sent)
            p.bytesReceived = max(p.bytesReceived, t.received - start.received)
            p.receiving = t.receiving
            p.receivingTotal = t.receivingTotal
            handler(p)
        }
    }
}
