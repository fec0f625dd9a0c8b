import Foundation
import Testing
import LnoteModel
import LnoteReplication
import LnoteSQLite
import LnoteSync
import LnoteServer
import LnoteTestSupport

/// The relay commands of §6 as an operator runs them: tokens with devices, devices, epoch
/// reset, quarantine ([SYNC-57], [SYNC-58], [SYNC-60]).
@Suite struct RelayTrustCLITests {
    let lnote = Subprocess.product("lnote")

    func run(_ args: String..., status: Int32 = 0) async throws -> Subprocess.Result {
        let r = try await Subprocess.run(lnote, args)
        #expect(r.status == status, "lnote \(args.joined(separator: " ")): \(r.errText)")
        return r
    }

    static func line(_ r: Subprocess.Result) -> String { r.outText.trimmingCharacters(in: .whitespacesAndNewlines) }

    @Test("[SYNC-57] relay token create needs --device; token list shows device and date; relay devices lists owners")
    func tokensAndDevices() async throws {
        let dir = try TempDir()
        let db = dir.sub("relay.sqlite")
        let nb = Self.line(try await run("relay", "notebook", "create", "--db", db))
        let missing = try await run("relay", "token", "create", "--db", db, "--notebook", nb, status: 2)
        #expect(missing.errText.contains("--device"), "\(missing.errText)")
        _ = try await run("relay", "token", "create", "--db", db, "--notebook", nb, "--device", "token-1234", status: 1)
        let token = Self.line(try await run("relay", "token", "create", "--db", db, "--notebook", nb, "--device", "laptop",
                                            "--label", "work"))
        #expect(RelayToken.isWellFormed(token))
        // A token of an older relay, made without a device.
        let store = try RelayStore(path: db)
        let legacy = try store.createToken(notebook: NotebookID(nb)!, label: "")
        try store.close()
        let listed = try await run("relay", "token", "list", "--db", db, "--notebook", nb).outText
            .split(separator: "\n").map(String.init)
        let year = Calendar(identifier: .gregorian).component(.year, from: Date())
        // A header, then one row per token: ID, DEVICE, CREATED, EXPIRES, LABEL.
        let rows = listed.map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(rows.count == 3 && rows[0] == ["ID", "DEVICE", "CREATED", "EXPIRES", "LABEL"], "\(listed)")
        #expect(rows.count == 3 && rows[1] == [String(hexString(RelayToken.digest(token)).prefix(16)), "laptop", rows[1][2], "never", "work"]
                && rows[1][2].hasPrefix("\(year)-") && rows[1][2].hasSuffix("Z"), "\(listed)")
        #expect(rows.count == 3 && Array(rows[2].prefix(3)) == [String(hexString(RelayToken.digest(legacy)).prefix(16)),
                                                                "token-\(hexString(RelayToken.digest(legacy)).prefix(8))", "(unnamed)"]
                && rows[2][3].hasPrefix("\(year)-"), "\(listed)")

        // The laptop syncs a folder: it owns the folder's replica id.
        _ = try await Fixture.notebook(at: dir.sub("A"), strokes: 2)
        let relay = try Subprocess.start(lnote, ["relay", "--db", db])
        #expect(await relay.waitForOutput("url: "))
        let base = relay.outputSoFar.split(separator: "\n").first { $0.hasPrefix("url: ") }.map { String($0.dropFirst(5)) } ?? ""
        _ = try await run("sync", dir.sub("A"), "\(base)/v1/notebooks/\(nb)", "--token", token)
        relay.kill(SIGTERM)
        _ = await relay.wait()
        let replica = try String(decoding: Data(contentsOf: URL(fileURLWithPath: dir.sub("A") + "/.lnote/replica.json")), as: UTF8.self)
        let devices = Self.line(try await run("relay", "devices", "--db", db, "--notebook", nb))
        #expect(devices.contains("  laptop  "), "\(devices)")
        #expect(replica.contains(String(devices.prefix(16))), "\(devices) vs \(replica)")
    }

    @Test("[SYNC-58] relay epoch reset: one notebook or all; the relay reports a restore it detects")
    func epochReset() async throws {
        let dir = try TempDir()
        let db = dir.sub("relay.sqlite")
        let n1 = Self.line(try await run("relay", "notebook", "create", "--db", db))
        let n2 = Self.line(try await run("relay", "notebook", "create", "--db", db))
        func epochs() throws -> [String: UInt64] {
            let store = try RelayStore(path: db)
            defer { try? store.close() }
            return Dictionary(uniqueKeysWithValues: try store.notebooks().map { ($0.id.description, $0.epoch) })
        }
        let e0 = try epochs()
        let one = Self.line(try await run("relay", "epoch", "reset", "--db", db, "--notebook", n1))
        let e1 = try epochs()
        #expect(one == "\(n1)  epoch \(String(e1[n1]!, radix: 16))")
        #expect(e1[n1] != e0[n1] && e1[n2] == e0[n2])
        let all = try await run("relay", "epoch", "reset", "--db", db).outText.split(separator: "\n")
        let e2 = try epochs()
        #expect(all.count == 2 && e2[n1] != e1[n1] && e2[n2] != e1[n2])
        _ = try await run("relay", "epoch", "reset", "--db", db, "--notebook", UUID().uuidString, status: 1)

        // A store holding operations whose mark is gone: `lnote relay` says what it did.
        let store = try RelayStore(path: db)
        _ = try store.sync(SyncRequest(replica: ReplicaID(1), epoch: 0, cursor: 0,
                                       push: [LogBatch(log: LogRef(document: DocumentID()),
                                                       ops: [Op(id: OpID(replica: ReplicaID(1), counter: 1), lamport: 1,
                                                                context: VectorClock(), wallTime: 0, body: .createDocument(title: "x"))])]),
                           notebook: NotebookID(n1)!)
        try store.close()
        try FileManager.default.removeItem(atPath: RelayStore.markPath(for: db))
        let relay = try Subprocess.start(lnote, ["relay", "--db", db])
        #expect(await relay.waitForOutput("url: "))
        relay.kill(SIGTERM)
        let out = await relay.wait()
        #expect(out.errText.contains("no high-water mark") && out.errText.contains("new epoch"), "\(out.errText)")
        let e3 = try epochs()
        #expect(e3[n1] != e2[n1] && e3[n2] != e2[n2])
    }

    @Test("[SYNC-60] relay quarantine list shows what the validator refuses; drop deletes it by id")
    func quarantine() async throws {
        let dir = try TempDir()
        let db = dir.sub("relay.sqlite")
        let nb = Self.line(try await run("relay", "notebook", "create", "--db", db))
        let log = LogRef(document: DocumentID(), page: PageID())
        let good = Op(id: OpID(replica: ReplicaID(0xA1), counter: 1), lamport: 1, context: VectorClock(), wallTime: 0,
                      body: .erase([OpID(replica: ReplicaID(9), counter: 1)]))
        let store = try RelayStore(path: db)
        _ = try store.sync(SyncRequest(replica: ReplicaID(0xA1), epoch: 0, cursor: 0, push: [LogBatch(log: log, ops: [good])]),
                           notebook: NotebookID(nb)!)
        try store.close()
        // As a relay of an older version could have stored it: a2 with Lamport 7 ([LOG-4] says 2).
        let a2 = Op(id: OpID(replica: ReplicaID(0xA1), counter: 2), lamport: 2, context: VectorClock([(ReplicaID(0xA1), UInt64(1))]),
                    wallTime: 0, body: .erase([OpID(replica: ReplicaID(9), counter: 1)]))
        var payload = OperationCodec.frame(a2).payload
        payload[9] = 7
        do {
            let raw = try SQLiteDatabase(path: db)
            defer { try? raw.close() }
            try raw.execute("""
                INSERT INTO ops (nb, document, page, replica, counter, frame, hash)
                SELECT nb, ?2, ?3, 161, 2, ?4, x'00' FROM notebooks WHERE id = ?1
                """, [.text(nb), .blob(log.document.uuid.bytes), .blob(log.page!.uuid.bytes),
                      .blob(Frame(type: 0x02, payload: payload).encoded)])
        }
        let listed = Self.line(try await run("relay", "quarantine", "list", "--db", db))
        #expect(listed.hasPrefix("\(nb)  \(log)  00000000000000a1.2  "), "\(listed)")
        #expect(listed.contains("[LOG-4]") && !listed.contains("\n"), "\(listed)")
        let valid = try await run("relay", "quarantine", "drop", "--db", db, "00000000000000a1.1", status: 1)
        #expect(valid.errText.contains("valid"), "\(valid.errText)")
        _ = try await run("relay", "quarantine", "drop", "--db", db, "not-an-id", status: 2)
        let dropped = Self.line(try await run("relay", "quarantine", "drop", "--db", db, "--notebook", nb, "--log", log.description,
                                              "00000000000000a1.2"))
        #expect(dropped == "dropped " + listed)
        #expect(Self.line(try await run("relay", "quarantine", "list", "--db", db)).isEmpty)
    }
}
