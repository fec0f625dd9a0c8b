import Foundation
import LnoteModel
import LnoteStore
import LnoteSync

/// One client of the run: its own notebook folder and replica, its own HTTP remote per relay
/// process and token (device `client-N`), and its own seeded randomness. Used by one task at
/// a time.
final class LoadClient: @unchecked Sendable {
    let index: Int
    let folder: String
    let notebook: Notebook
    /// One per relay process, in the relays' order.
    let remotes: [HTTPRemote]
    private var rng: SplitMix64
    private var handwriting: HandwritingGenerator
    private var documentsMade = 0

    static var storeOptions: StoreOptions {
        var o = StoreOptions()
        o.autosave = false
        return o
    }

    init(index: Int, folder: String, urls: [String], token: String, seed: UInt64) async throws {
        self.index = index
        self.folder = folder
        rng = SplitMix64(seed: seed)
        handwriting = HandwritingGenerator(seed: seed ^ 0x5EED)
        notebook = try await Notebook.open(at: folder, create: true, options: Self.storeOptions)
        var options = HTTPRemote.Options(token: token)
        // As `lnote sync`: a few attempts per request, each bounded; the run's own rounds retry the rest.
        options.retry.maxAttempts = 3
        options.connectTimeout = .seconds(5)
        options.requestTimeout = .seconds(30)
        var made: [HTTPRemote] = []
        do {
            for url in urls { made.append(try HTTPRemote(url: url, options: options)) }
        } catch {
            for r in made { try? r.close() }
            try? await notebook.close()
            throw error
        }
        remotes = made
    }

    func close() async throws {
        for r in remotes { try r.close() }
        try await notebook.close()
    }

    /// The relay process of the next round: one at random when there are several (with one,
    /// no random draw, so a one-relay run's edits follow its seed as before).
    func pickRelay() -> Int { remotes.count == 1 ? 0 : rng.int(in: 0...(remotes.count - 1)) }

    /// The replica ids this client's operations were made under (one, unless it was reminted).
    var ownReplicas: Set<ReplicaID> {
        var s: Set<ReplicaID> = [notebook.replica]
        for c in notebook.replicaChanges { s.insert(c.old); s.insert(c.new) }
        return s
    }

    /// The operations this client made, read from its logs' clocks.
    func ownOperations() async throws -> OpSet {
        OpSet(try await notebook.logClocks()).restricted(to: ownReplicas)
    }

    /// How many edits before the next sync round (1…3).
    func editsPerRound() -> Int { rng.int(in: 1...3) }

    func pause(_ range: ClosedRange<Int>) async throws {
        try await Task.sleep(for: .milliseconds(rng.int(in: range)))
    }

    /// One random edit: strokes mostly, sometimes an erase, a move, a page, a title or a new
    /// document, on any document the client holds (its own or received).
    func edit() async throws {
        let ids = try await notebook.documentIDs()
        if ids.isEmpty || (documentsMade < 3 && rng.chance(0.02)) {
            documentsMade += 1
            let d = try await notebook.createDocument(title: "client \(index) document \(documentsMade)")
            _ = try await d.addStrokes(handwriting.strokes(2), to: await d.pageList[0].id)
            return
        }
        let d = try await notebook.openDocument(ids[rng.int(in: 0...(ids.count - 1))])
        let pages = await d.pageList
        guard !pages.isEmpty else {
            _ = try await d.addPage()
            return
        }
        let page = pages[rng.int(in: 0...(pages.count - 1))].id
        let r = rng.unit()
        if r < 0.12 || r >= 0.97 {
            if r < 0.12, let e = try await randomElement(d, page) {
                try await d.erase([e], on: page)
            } else if r >= 0.97 {
                try await d.setTitle("client \(index) title \(rng.int(in: 0...999))")
            } else {
                _ = try await d.addStrokes(handwriting.strokes(1), to: page)
            }
        } else if r < 0.24 {
            if let e = try await randomElement(d, page) {
                try await d.move([e], dx: Int32(rng.int(in: -50...50)), dy: Int32(rng.int(in: -50...50)), on: page)
            } else {
                _ = try await d.addStrokes(handwriting.strokes(1), to: page)
            }
        } else if r < 0.30 {
            _ = try await d.addPage()
        } else {
            _ = try await d.addStrokes(handwriting.strokes(rng.int(in: 1...3)), to: page)
        }
    }

    private func randomElement(_ d: Document, _ page: PageID) async throws -> ElementID? {
        let elements = try await d.elements(page)
        guard !elements.isEmpty else { return nil }
        return elements[rng.int(in: 0...(elements.count - 1))].id
    }

    /// One sync round with relay process `relay`.
    func sync(through relay: Int) async throws -> SyncReport {
        try await SyncSession(notebook: notebook, remote: remotes[relay]).run()
    }

    /// What a report shows that should never happen in this run: forks, quarantined
    /// operations, operations lost from logs, checkpoint failures.
    static func anomaly(_ r: SyncReport) -> String? {
        var parts: [String] = []
        if !r.forks.isEmpty { parts.append("\(r.forks.count) forks: \(r.forks.map(\.description).prefix(2))") }
        if !r.quarantined.isEmpty { parts.append("\(r.quarantined.count) quarantined: \(r.quarantined.map(\.reason).prefix(2))") }
        if !r.missingOperations.isEmpty { parts.append("\(r.missingOperations.count) logs missing operations") }
        if !r.checkpointFailures.isEmpty { parts.append("checkpoint failures: \(r.checkpointFailures.prefix(2))") }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    /// Whether a round moved anything new: operations the relay accepted or the client
    /// received, assets, checkpoints. Operations sent but not accepted (the relay held them
    /// already) do not count: a client that switches between relay processes on one
    /// database was seen to resend operations it had pushed through another process (the
    /// relay accepting none of them), pass after pass, and such rounds move nothing. The final checks (everything
    /// made on the relay and on every client) do not depend on this.
    static func moved(_ r: SyncReport) -> Bool {
        r.opsAccepted + r.opsReceived + r.assetsSent + r.assetsReceived + r.checkpointsInstalled > 0
    }
}
