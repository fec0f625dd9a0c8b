import Foundation
import Synchronization
import LnoteModel

/// What the run saw, shared by the clients and the kill controller: the relay's state, the
/// operations each client made and had acknowledged, and every sync round's outcome.
final class LoadLedger: Sendable {
    struct State {
        /// Per relay process, incremented by each kill: a round that saw it change overlapped a kill.
        var generation: [Int]
        var relayUp: [Bool]
        /// Incremented by each database restart (PostgreSQL); `databaseUp` false while it is stopped.
        var databaseGeneration = 0
        var databaseUp = true
        var made: [OpSet]
        var acked: [OpSet]
        var latencies: [Double] = []
        /// Successful rounds during which the relay (and the database) stayed up (no kill, no downtime).
        var latenciesUp: [Double] = []
        var rounds = 0
        var failuresWhileDown = 0
        var failuresWhileUp: [String] = []
        var anomalies: [String] = []
        var slowRounds = 0
        var editFailures: [String] = []
        var edits = 0
        /// Successful rounds per relay process.
        var roundsPerRelay: [Int]
        /// Operations pushed by successful rounds, and how many of them the relay stored anew.
        var opsSent = 0
        var opsAccepted = 0
    }

    let state: Mutex<State>
    /// A round longer than this counts as hung. Each request of a round is bounded (30 s, at
    /// most 3 attempts); rounds of 40 s were seen with 32 clients on two busy cores, hence the margin.
    static let roundBound: Duration = .seconds(120)

    init(clients: Int, relays: Int = 1) {
        state = Mutex(State(generation: Array(repeating: 0, count: relays), relayUp: Array(repeating: false, count: relays),
                            made: Array(repeating: OpSet(), count: clients), acked: Array(repeating: OpSet(), count: clients),
                            roundsPerRelay: Array(repeating: 0, count: relays)))
    }

    /// What a round depends on, as it was at one moment: its relay process and the database.
    struct Serving: Equatable {
        var generation: Int
        var up: Bool
        var databaseGeneration: Int
        var databaseUp: Bool
        /// Serving at that moment: the relay up and the database up.
        var isUp: Bool { up && databaseUp }
    }

    /// Relay `i`'s generation and whether it (and the database) is serving.
    func serving(_ i: Int) -> Serving {
        state.withLock { Serving(generation: $0.generation[i], up: $0.relayUp[i], databaseGeneration: $0.databaseGeneration,
                                 databaseUp: $0.databaseUp) }
    }

    func relayKilled(_ i: Int) { state.withLock { $0.generation[i] += 1; $0.relayUp[i] = false } }
    func relayServing(_ i: Int) { state.withLock { $0.relayUp[i] = true } }
    func databaseStopped() { state.withLock { $0.databaseGeneration += 1; $0.databaseUp = false } }
    func databaseServing() { state.withLock { $0.databaseUp = true } }

    func recordMade(_ ops: OpSet, client: Int) { state.withLock { $0.made[client] = ops; $0.edits += 1 } }
    func recordEditFailure(_ message: String) { state.withLock { $0.editFailures.append(message) } }

    /// Everything acknowledged so far, all clients together.
    var ackedUnion: OpSet {
        state.withLock { s in s.acked.reduce(into: OpSet()) { $0.merge($1) } }
    }

    enum RoundOutcome {
        /// The round returned success having started with `pushed` as the client's own operations.
        case ok(pushed: OpSet, anomaly: String?, sent: Int, accepted: Int)
        case failed(String)
    }

    /// Records a sync round through relay `relay`. A failure counts as expected when that relay
    /// or the database was down at the start or the end of the round, or was killed or
    /// restarted during it.
    func recordRound(client: Int, relay: Int, started: Serving, duration: Duration, _ outcome: RoundOutcome) {
        let ms = Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
        state.withLock { s in
            s.rounds += 1
            let now = Serving(generation: s.generation[relay], up: s.relayUp[relay], databaseGeneration: s.databaseGeneration,
                              databaseUp: s.databaseUp)
            let upThroughout = started.isUp && now == started
            if duration > Self.roundBound { s.slowRounds += 1 }
            switch outcome {
            case .ok(let pushed, let anomaly, let sent, let accepted):
                s.opsSent += sent
                s.opsAccepted += accepted
                s.latencies.append(ms)
                if upThroughout { s.latenciesUp.append(ms) }
                s.roundsPerRelay[relay] += 1
                s.acked[client].merge(pushed)
                if let anomaly { s.anomalies.append("client \(client): \(anomaly)") }
            case .failed(let message):
                if !upThroughout {
                    s.failuresWhileDown += 1
                } else {
                    s.failuresWhileUp.append("client \(client): \(message)")
                }
            }
        }
    }
}
