import Foundation
import Synchronization
import LnoteModel
import LnoteReplication
import LnoteStore
import LnoteSync
import LnoteServer

/// Replicas that are notebook folders talking HTTP on loopback: a sync is each replica
/// syncing with a real relay (SQLite, libmicrohttpd) through the real libcurl client; a
/// one-way delivery is a push to the receiving replica's own peer server (`lnote serve`).
public final class HTTPTransport: ScenarioTransport {
    public var name: String { "http" }
    private let folders: FolderTransport
    private let relayStore: RelayStore
    private let relay: RelayServer
    private let notebook: NotebookID
    private let token: String
    private let peers = Mutex<[ReplicaID: (server: PeerServer, token: String)]>([:])

    public init() throws {
        folders = try FolderTransport()
        relayStore = try RelayStore(path: folders.root.appendingPathComponent("relay.sqlite").path)
        notebook = try relayStore.createNotebook()
        token = try relayStore.createToken(notebook: notebook, label: "scenario")
        relay = try RelayServer(store: relayStore)
    }

    public func makeNode(replica: ReplicaID, label: String, document: DocumentID) async throws -> any ScenarioNode {
        let node = try await folders.makeNode(replica: replica, label: label, document: document) as! FolderNode
        let peerToken = RelayToken.generate()
        let server = try PeerServer(notebook: node.notebook, token: peerToken)
        peers.withLock { $0[replica] = (server, peerToken) }
        return node
    }

    /// Pushes exactly these operations, in this order, to the receiving replica's server.
    public func deliver(_ ops: [LoggedOp], from: any ScenarioNode, to: any ScenarioNode) async throws {
        guard let to = to as? FolderNode, let peer = peers.withLock({ $0[to.replica] }) else {
            throw LnoteError(.invalidArgument, "not an HTTP node")
        }
        guard !ops.isEmpty else { return }
        // Consecutive operations of one log form one batch, so the order is kept exactly.
        var batches: [LogBatch] = []
        for lo in ops {
            let log = LogRef(document: to.document, page: { if case .page(let p) = lo.log { return p } else { return nil } }())
            if let last = batches.last, last.log == log {
                batches[batches.count - 1].frames.append(OperationCodec.frame(lo.op))
            } else {
                batches.append(LogBatch(log: log, frames: [OperationCodec.frame(lo.op)]))
            }
        }
        let remote = try HTTPRemote(url: peer.server.url, options: .init(token: peer.token))
        defer { try? remote.close() }
        _ = try await remote.sync(SyncRequest(replica: from.replica, epoch: 0, cursor: 0, push: batches))
    }

    public func sync(_ nodes: [any ScenarioNode]) async throws {
        let url = relay.url(notebook: notebook)
        for _ in 0..<2 {
            for case let node as FolderNode in nodes {
                let remote = try HTTPRemote(url: url, options: .init(token: token))
                defer { try? remote.close() }
                _ = try await SyncSession(notebook: node.notebook, remote: remote).run()
            }
        }
    }

    public func close() async throws {
        for p in peers.withLock({ Array($0.values) }) { try? p.server.close() }
        try? relay.close()
        try? relayStore.close()
        try await folders.close()
    }
}
