import Foundation
import LnoteModel
import LnoteReplication
import LnoteServer
import LnoteSync
import Testing
import LnoteTestSupport

@Suite("Relay sync")
struct RelaySyncTests {
    @Test("[SYNC-4] [SYNC-5] two clients round-trip edits through the relay; steady state is one exchange", arguments: RelayBackends.all)
    func roundTrip(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, _ in
            let ep = try store.endpoint(notebook: nb)
            var rng = SeededRNG(seed: 7)
            let a = TestNotebook(replica: ReplicaID(0xA)), b = TestNotebook(replica: ReplicaID(0xB))
            let doc = try a.createDocument("shared")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            for _ in 0..<5 { try a.addStroke(page, randomStroke(&rng)) }

            let ra1 = try await a.sync(ep)
            #expect(ra1.roundTrips == 2, "first contact: clocks, then the push")
            #expect(ra1.opsAccepted == 7)
            let rb1 = try await b.sync(ep)
            #expect(rb1.opsApplied == 7)
            #expect(a.view == b.view)

            let ids = b.live(page)
            try b.edit(page) { r, me, t in try r.move([ids[0]], dx: 30, dy: -20, by: me, wallTime: t) }
            try b.edit(page) { r, me, t in try r.make(.erase([ids[1]]), by: me, wallTime: t) }
            try b.addStroke(page, randomStroke(&rng))
            let rb2 = try await b.sync(ep)
            #expect(rb2.roundTrips == 1, "steady state: one exchange")
            #expect(rb2.opsAccepted == 3 && rb2.opsReceived == 0)
            let ra2 = try await a.sync(ep)
            #expect(ra2.roundTrips == 1)
            #expect(ra2.opsApplied == 3)
            #expect(a.view == b.view)

            // Nothing new: an empty exchange, nothing pulled.
            let ra3 = try await a.sync(ep)
            #expect(ra3.roundTrips == 1 && ra3.opsReceived == 0 && ra3.opsSent == 0)
            #expect(try store.clocks(notebook: nb) == (try await a.logClocks()))
        }
    }

    @Test("[SYNC-7] a push sent twice is stored once; repeated frames in one push count once", arguments: RelayBackends.all)
    func duplicatePushes(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, database in
            var d = DocumentReplica(id: DocumentID())
            let me = ReplicaID(0x51)
            let create = try d.make(.createDocument(title: "dup"), by: me, wallTime: 1)
            let p = PageID()
            let addPage = try d.make(.addPage(p, position: d.endPosition, canvas: .a4), by: me, wallTime: 2)
            var page = PageReplica(page: p)
            var rng = SeededRNG(seed: 99)
            let strokes = try (0..<5).map { i in try page.add(.stroke(randomStroke(&rng)), by: me, wallTime: 3 + Int64(i)) }
            let docLog = LogRef(document: d.id), pageLog = LogRef(document: d.id, page: p)
            let push = [LogBatch(log: docLog, ops: [create, addPage]), LogBatch(log: pageLog, ops: strokes)]

            let r1 = try store.sync(SyncRequest(replica: me, epoch: 0, cursor: 0, have: [], push: push), notebook: nb)
            #expect(r1.accepted == 7)
            #expect(r1.pull.isEmpty, "what the request pushed is not sent back")
            #expect(r1.clocks == [LogClock(log: docLog, clock: d.clock), LogClock(log: pageLog, clock: page.clock)])
            let after1 = try RelayCounts.read(store)
            #expect(after1.ops == 7)

            let r2 = try store.sync(SyncRequest(replica: me, epoch: r1.epoch, cursor: r1.cursor, push: push), notebook: nb)
            #expect(r2.accepted == 0)
            #expect(r2.cursor == r1.cursor && !r2.resync && r2.pull.isEmpty)
            #expect(try RelayCounts.read(store) == after1)

            // The same new frame three times in one push, and an old one again.
            let extra = try page.add(.stroke(randomStroke(&rng)), by: me, wallTime: 20)
            let f = OperationCodec.frame(extra)
            let r3 = try store.sync(SyncRequest(replica: me, epoch: r1.epoch, cursor: r2.cursor,
                                                push: [LogBatch(log: pageLog, frames: [f, f, OperationCodec.frame(strokes[0]), f])]),
                                    notebook: nb)
            #expect(r3.accepted == 1)
            #expect(r3.cursor > r2.cursor && r3.pull.isEmpty)
            #expect(try RelayCounts.read(store).ops == 8)

            // Another client asking since the start gets every operation exactly once.
            let r4 = try store.sync(SyncRequest(replica: ReplicaID(0x52), epoch: r1.epoch, cursor: 0), notebook: nb)
            #expect(r4.pull.reduce(0) { $0 + $1.frames.count } == 8)
            #expect(r4.pull.map(\.log) == [docLog, pageLog])
            #expect(r4.pull[1].frames == strokes.map(OperationCodec.frame) + [f], "frames in the order received")
        }
    }

    @Test("[SYNC-3] relay clocks are contiguous per replica; a have-pull sends every op the clock does not cover", arguments: RelayBackends.all)
    func contiguousClocks(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, _ in
            let doc = DocumentID()
            let pageLog = LogRef(document: doc, page: PageID()), docLog = LogRef(document: doc)
            let ops = [1, 2, 3, 5].map { syntheticOp(replica: 0xA, counter: UInt64($0), page: true) }
            let r1 = try store.sync(SyncRequest(replica: ReplicaID(0xC), epoch: 0, cursor: 0, have: [],
                                                push: [LogBatch(log: pageLog, ops: ops)]), notebook: nb)
            #expect(r1.accepted == 4)
            #expect(r1.clocks == [LogClock(log: pageLog, clock: VectorClock([(ReplicaID(0xA), UInt64(3))]))])

            // A client holding 1...3 gets 5 (held beyond the gap).
            let r2 = try store.sync(SyncRequest(replica: ReplicaID(0xD), epoch: 0, cursor: 0,
                                                have: [LogClock(log: pageLog, clock: VectorClock([(ReplicaID(0xA), UInt64(3))]))]),
                                    notebook: nb)
            #expect(r2.pull == [LogBatch(log: pageLog, ops: [ops[3]])])

            // Counters starting above 1 give no entry at all; filling the gap advances the head.
            _ = try store.sync(SyncRequest(replica: ReplicaID(0xC), epoch: r1.epoch, cursor: r1.cursor,
                                           push: [LogBatch(log: docLog, ops: [syntheticOp(replica: 0xB, counter: 2, page: false)]),
                                                  LogBatch(log: pageLog, ops: [syntheticOp(replica: 0xA, counter: 4, page: true)])]),
                               notebook: nb)
            #expect(try store.clocks(notebook: nb) == [LogClock(log: pageLog, clock: VectorClock([(ReplicaID(0xA), UInt64(5))]))])
        }
    }

    @Test("[SYNC-3] clocks and have-pulls match a brute-force model over random gappy logs", arguments: RelayBackends.all, 1...10)
    func clocksMatchModel(backend: RelayBackendKind, seed: UInt64) async throws {
        try await withRelay(backend) { store, nb, _ in
            var rng = SeededRNG(seed: seed)
            let doc = DocumentID()
            let logs = [LogRef(document: doc), LogRef(document: doc, page: PageID()), LogRef(document: DocumentID(), page: PageID())]
            let replicas: [UInt64] = [1, 0xFFFF_FFFF_FFFF_FFF0, 77] // one above Int64.max
            var held: [LogRef: [UInt64: Set<UInt64>]] = [:]
            var epoch: UInt64 = 0, cursor: UInt64 = 0
            for _ in 0..<6 {
                var push: [LogBatch] = []
                for log in logs where Bool.random(using: &rng) {
                    var ops: [Op] = []
                    for rep in replicas {
                        for c in 1...UInt64(12) where Int.random(in: 0..<3, using: &rng) == 0 {
                            ops.append(syntheticOp(replica: rep, counter: c, page: log.page != nil))
                            held[log, default: [:]][rep, default: []].insert(c)
                        }
                    }
                    ops.shuffle(using: &rng)
                    if !ops.isEmpty { push.append(LogBatch(log: log, ops: ops)) }
                }
                let r = try store.sync(SyncRequest(replica: ReplicaID(9), epoch: epoch, cursor: cursor,
                                                   have: epoch == 0 ? [] : nil, push: push), notebook: nb)
                epoch = r.epoch
                cursor = r.cursor
            }
            var expected: [LogClock] = []
            for log in held.keys.sorted() {
                var c = VectorClock()
                for (rep, counters) in held[log]! {
                    var h: UInt64 = 0
                    while counters.contains(h + 1) { h += 1 }
                    c[ReplicaID(rep)] = h
                }
                if !c.isEmpty { expected.append(LogClock(log: log, clock: c)) }
            }
            #expect(try store.clocks(notebook: nb) == expected, "seed \(seed)")

            // A random client clock: the pull is exactly the held ops above it.
            let theirs = logs.map { log in
                LogClock(log: log, clock: VectorClock(replicas.map { (ReplicaID($0), UInt64.random(in: 0...12, using: &rng)) }))
            }
            let r = try store.sync(SyncRequest(replica: ReplicaID(10), epoch: 0, cursor: 0, have: theirs), notebook: nb)
            var got: [LogRef: Set<OpID>] = [:]
            for b in r.pull { got[b.log, default: []].formUnion(try b.ops().map(\.id)) }
            var want: [LogRef: Set<OpID>] = [:]
            for (log, byRep) in held {
                let clock = theirs.first { $0.log == log }!.clock
                for (rep, counters) in byRep {
                    for c in counters where c > clock[ReplicaID(rep)] {
                        want[log, default: []].insert(OpID(replica: ReplicaID(rep), counter: c))
                    }
                }
            }
            #expect(got == want, "seed \(seed)")
            #expect(r.cursor == cursor, "seed \(seed)")
        }
    }

    @Test("[SYNC-6] another epoch without have: the push is kept, nothing pulled, resync set", arguments: RelayBackends.all)
    func epochMismatch(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, database in
            let first = try store.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0, have: [],
                                                   push: [LogBatch(log: LogRef(document: DocumentID()),
                                                                   ops: [syntheticOp(replica: 1, counter: 1, page: false)])]),
                                       notebook: nb)
            let log = LogRef(document: DocumentID(), page: PageID())
            let r = try store.sync(SyncRequest(replica: ReplicaID(2), epoch: first.epoch &+ 1, cursor: 0,
                                               push: [LogBatch(log: log, ops: [syntheticOp(replica: 2, counter: 1, page: true)])]),
                                   notebook: nb)
            #expect(r.resync && r.pull.isEmpty && r.accepted == 1 && r.clocks == nil)
            #expect(r.epoch == first.epoch)
            #expect(try RelayCounts.read(store).ops == 2)
            #expect(r.cursor == UInt64(try RelayCounts.read(store).maxSeq))

            // A cursor past the notebook's (a store restored from an older copy) also resyncs.
            let future = try store.sync(SyncRequest(replica: ReplicaID(2), epoch: first.epoch, cursor: r.cursor + 5), notebook: nb)
            #expect(future.resync && future.pull.isEmpty)
            // Epoch 0 (none) without have: resync.
            let none = try store.sync(SyncRequest(replica: ReplicaID(3), epoch: 0, cursor: 0), notebook: nb)
            #expect(none.resync)
        }
    }

    @Test("[SYNC-6] after the relay's epoch changes, clients resynchronize by clocks and converge", arguments: RelayBackends.all)
    func resyncConverges(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, _ in
            let ep = try store.endpoint(notebook: nb)
            var rng = SeededRNG(seed: 3)
            let a = TestNotebook(replica: ReplicaID(1)), b = TestNotebook(replica: ReplicaID(2))
            let doc = try a.createDocument("epoch")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            try a.addStroke(page, randomStroke(&rng))
            try await a.sync(ep)
            try await b.sync(ep)
            let old = try store.info(notebook: nb).epoch
            let new = try store.resetEpoch(notebook: nb)
            #expect(new != old)

            try a.addStroke(page, randomStroke(&rng))
            try b.addStroke(page, randomStroke(&rng))
            let ra = try await a.sync(ep)
            // Steady (resync: the push is kept), then clocks; nothing is left to push.
            #expect(ra.roundTrips == 2, "steady (resync), clocks")
            #expect(ra.opsAccepted == 1)
            let rb = try await b.sync(ep)
            #expect(rb.roundTrips == 2)
            try await a.sync(ep)
            #expect(a.view == b.view)
            #expect(try store.clocks(notebook: nb) == (try await a.logClocks()))
        }
    }

    @Test("[SYNC-9] a pull over the limit is cut in sequence order and the next syncs continue from its cursor", arguments: RelayBackends.all)
    func truncatedPulls(backend: RelayBackendKind) async throws {
        let limit = 4096
        try await withRelay(backend, pullLimit: limit) { store, nb, _ in
            let ep = try store.endpoint(notebook: nb)
            var rng = SeededRNG(seed: 11)
            let a = TestNotebook(replica: ReplicaID(1)), b = TestNotebook(replica: ReplicaID(2))
            let doc = try a.createDocument("big")
            let pages = try (0..<3).map { _ in LogRef(document: doc, page: try a.addPage(doc)) }
            for i in 0..<300 { try a.addStroke(pages[i % 3], randomStroke(&rng)) }
            try await a.sync(ep)

            let remote = RecordingRemote(endpoint: ep)
            var syncs = 0
            while b.view != a.view {
                syncs += 1
                try #require(syncs < 100, "no progress")
                _ = try await SyncSession(notebook: b, remote: remote).run()
            }
            let answers = remote.answers.withLock { $0 }
            let final = try store.info(notebook: nb).cursor
            #expect(syncs >= 3, "the catch-up took several syncs")
            for ans in answers {
                let frames = ans.pull.reduce(0) { $0 + $1.encodedSize }
                #expect(frames <= limit, "pull of \(frames) bytes over the \(limit) limit")
            }
            #expect(answers.last?.cursor == final)
            #expect(answers.dropLast().allSatisfy { $0.cursor < final })
            #expect(zip(answers, answers.dropFirst()).allSatisfy { $0.cursor <= $1.cursor }, "cursors only grow")
            // The have-answer was cut too and still carried every clock.
            #expect(answers[0].clocks?.count == 4)
        }
    }

    @Test("[SYNC-8] assets: hash checked, shared by the documents of a notebook, travel before the ops", arguments: RelayBackends.all)
    func assets(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, database in
            let ep = try store.endpoint(notebook: nb)
            var rng = SeededRNG(seed: 5)
            let bytes = randomBytes(10_000, &rng)
            let id = AssetID.of(bytes)
            let other = AssetID.of([1, 2, 3])
            await #expect(throws: LnoteError(.invalidArgument)) {
                try await ep.putAsset(bytes, id: other, document: DocumentID())
            }
            await #expect(throws: LnoteError(.notFound)) { _ = try await ep.getAsset(id, document: DocumentID()) }
            #expect(try await ep.missingAssets([other, id, other], document: DocumentID()) == [other, id, other])
            #expect(try store.putAsset(bytes, id: id, notebook: nb) == true)
            #expect(try store.putAsset(bytes, id: id, notebook: nb) == false)
            #expect(try await ep.missingAssets([other, id], document: DocumentID()) == [other], "any document")
            #expect(try await ep.getAsset(id, document: DocumentID()) == bytes)
            #expect(try store.putAsset([], id: AssetID.of([]), notebook: nb))
            #expect(try await ep.getAsset(AssetID.of([]), document: DocumentID()) == [])
            #expect(try RelayCounts.read(store).assets == 2)

            // Through sessions: A uploads before pushing, B downloads before applying.
            let a = TestNotebook(replica: ReplicaID(1)), b = TestNotebook(replica: ReplicaID(2))
            let doc = try a.createDocument("images")
            let page = LogRef(document: doc, page: try a.addPage(doc))
            let picture = randomBytes(3000, &rng)
            try a.addImage(page, picture)
            try a.addImage(page, bytes)
            let ra = try await a.sync(ep)
            #expect(ra.assetsSent == 1, "the asset the relay already held is not sent again")
            let rb = try await b.sync(ep)
            #expect(rb.assetsReceived == 2)
            #expect(try await b.readAsset(AssetID.of(picture), document: doc) == picture)
            #expect(a.view == b.view)
        }
    }

    @Test("concurrent syncs of three clients through one store converge", arguments: RelayBackends.all)
    func concurrentClients(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, nb, _ in
            let ep = try store.endpoint(notebook: nb)
            let clients = (1...3).map { TestNotebook(replica: ReplicaID(UInt64($0))) }
            var rng = SeededRNG(seed: 21)
            for c in clients {
                let doc = try c.createDocument("c\(c.replicaID)")
                let page = LogRef(document: doc, page: try c.addPage(doc))
                for _ in 0..<10 { try c.addStroke(page, randomStroke(&rng)) }
            }
            for _ in 0..<3 {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for c in clients { group.addTask { try await c.sync(ep) } }
                    try await group.waitForAll()
                }
            }
            #expect(clients[0].view == clients[1].view && clients[1].view == clients[2].view)
            #expect(clients[0].opCount == 3 * 12)
        }
    }

    @Test("an unknown notebook is not found", arguments: RelayBackends.all)
    func unknownNotebook(backend: RelayBackendKind) async throws {
        try await withRelay(backend) { store, _, _ in
            let ghost = NotebookID()
            #expect(throws: LnoteError(.notFound)) { _ = try store.endpoint(notebook: ghost) }
            #expect(throws: LnoteError(.notFound)) {
                _ = try store.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0, have: []), notebook: ghost)
            }
            #expect(throws: LnoteError(.notFound)) { _ = try store.putAsset([1], id: AssetID.of([1]), notebook: ghost) }
            #expect(throws: LnoteError(.alreadyExists)) {
                let id = try store.createNotebook()
                try store.createNotebook(id: id)
            }
        }
    }
}
