import Foundation
import Synchronization
import LnoteModel

/// What the run saw, shared by the clients and the kill controller: the relay's state, the
/// operations each client made and had acknowledged, and every sync round's outcome.
final class LoadLedger: Sendable {
    struct State {
        /// Incremented by each kill: a round that saw it change overlapped a kill.
        var generation = 0
        var relayUp = false
        var made: [OpSet]
        var acked: [OpSet]
        var latencies: [Double] = []
        /// Successful rounds during which the relay stayed up (no kill, no downtime).
        var latenciesUp: [Double] = []
        var rounds = 0
        var failuresWhileDown = 0
        var failuresWhileUp: [String] = []
        var anomalies: [String] = []
        var slowRounds = 0
        var editFailures: [String] = []
        var edits = 0
    }

    let state: Mutex<State>
    /// A round longer than this counts as hung. Each request of a round is bounded (30 s, at
    /// most 3 attempts); rounds of 40 s were seen with 32 clients on two busy cores, hence the margin.
    static let roundBound: Duration = .seconds(120)

    init(clients: Int) {
        state = Mutex(State(made: Array(repeating: OpSet(), count: clients), acked: Array(repeating: OpSet(), count: clients)))
    }

    /// The relay's generation and whether it is serving.
    var relay: (generation: Int, up: Bool) { state.withLock { ($0.generation, $0.relayUp) } }

    func relayKilled() { state.withLock { $0.generation += 1; $0.relayUp = false } }
    func relayServing() { state.withLock { $0.relayUp = true } }

    func recordMade(_ ops: OpSet, client: Int) { state.withLock { $0.made[client] = ops; $0.edits += 1 } }
    func recordEditFailure(_ message: String) { state.withLock { $0.editFailures.append(message) } }

    /// Everything acknowledged so far, all clients together.
    var ackedUnion: OpSet {
        state.withLock { s in s.acked.reduce(into: OpSet()) { $0.merge($1) } }
    }

    enum RoundOutcome {
        /// The round returned success having started with `pushed` as the client's own operations.
        case ok(pushed: OpSet, anomaly: String?)
        case failed(String)
    }

    /// Records a sync round. A failure counts as expected when the relay was down at the
    /// start or the end of the round, or was killed during it.
    func recordRound(client: Int, started: (generation: Int, up: Bool), duration: Duration, _ outcome: RoundOutcome) {
        let ms = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        state.withLock { s in
            s.rounds += 1
            if duration > Self.roundBound { s.slowRounds += 1 }
            switch outcome {
            case .ok(let pushed, let anomaly):
                s.latencies.append(ms)
                if started.up && s.relayUp && started.generation == s.generation { s.latenciesUp.append(ms) }
                s.acked[client].merge(pushed)
                if let anomaly { s.anomalies.append("client \(client): \(anomaly)") }
            case .failed(let message):
                if !started.up || !s.relayUp || started.generation != s.generation {
                    s.failuresWhileDown += 1
                } else {
                    s.failuresWhileUp.append("client \(client): \(message)")
                }
            }
        }
    }
}
