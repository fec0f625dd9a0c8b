import Foundation
import Testing
import LnoteModel
import LnoteTestSupport
@testable import LnoteStore

/// [PKG-66] A missing or damaged `.lnote/replica.json`: opening mints a new random id, keeps
/// the damaged file aside, writes the new file durably and says so; it never fails and never
/// reuses the id the damaged file seems to hold.
@Suite("replica.json recovery")
struct ReplicaFileRecoveryTests {
    /// Each damage: a name and the bytes written over replica.json given the valid one.
    static func damages(_ valid: String, id: String) -> [(String, String)] {
        [("truncated", String(valid.prefix(valid.count / 2))),
         ("empty", ""),
         ("not JSON", "replica = \(id)\n"),
         ("JSON array", "[1, 2]"),
         ("wrong types", valid.replacingOccurrences(of: "\"format\" : 1", with: "\"format\" : \"1\"")),
         ("id 0", valid.replacingOccurrences(of: id, with: "0000000000000000")),
         ("id not hex", valid.replacingOccurrences(of: id, with: "zzzzzzzzzzzzzzzz")),
         ("id too long", valid.replacingOccurrences(of: id, with: id + "00")),
         ("huge numbers", valid.replacingOccurrences(of: "\"format\" : 1", with: "\"format\" : 123456789012345678901234567890")),
         ("huge device", valid.replacingOccurrences(of: "\"device\" : ", with: "\"device\" : 99999999999999999999999")),
         ("negative inode", valid.replacingOccurrences(of: "\"inode\" : ", with: "\"inode\" : -")),
         ("no fingerprint", "{\"format\": 1, \"replica\": \"\(id)\", \"previous\": []}"),
         ("fingerprint of wrong type", "{\"format\": 1, \"replica\": \"\(id)\", \"fingerprint\": \"here\", \"previous\": []}"),
         ("format 0", valid.replacingOccurrences(of: "\"format\" : 1", with: "\"format\" : 0")),
         ("NUL bytes", String(repeating: "\u{0}", count: 40))]
    }

    @Test("[PKG-66] every damaged replica.json: a new id, the file kept aside, the notebook usable")
    func damaged() async throws {
        let probe = try TempDir("replica-probe")
        defer { probe.remove() }
        let nb0 = try await openNotebook(probe.path)
        try await nb0.close()
        let valid = String(decoding: fileBytes(probe.sub(".lnote/replica.json"))!, as: UTF8.self)
        let id0 = nb0.replica.description
        #expect(valid.contains("\"format\" : 1"), "the fixtures edit the encoder's layout: \(valid)")
        var cases = 0, failed = 0
        for (name, _) in Self.damages(valid, id: id0) {
            let dir = try TempDir("replica")
            defer { dir.remove() }
            let nb = try await openNotebook(dir.path)
            let d = try await nb.createDocument(title: "kept")
            try await d.close()
            try await nb.close()
            let file = dir.sub(".lnote/replica.json")
            let good = String(decoding: fileBytes(file)!, as: UTF8.self)
            let old = nb.replica
            let damage = Self.damages(good, id: old.description).first { $0.0 == name }!.1
            #expect(damage != good, "\(name): the fixture changed nothing")
            try writeFile(file, Array(damage.utf8))

            do {
                let nb2 = try await openNotebook(dir.path)
                let r = try #require(nb2.replicaFileRecovery, "\(name)")
                #expect(nb2.replica != old && nb2.replica.rawValue != 0, "\(name): \(r)")
                #expect(r.minted == nb2.replica)
                #expect(r.setAside == file + ".corrupt-1" || r.setAside?.hasSuffix("/.lnote/replica.json.corrupt-1") == true, "\(r)")
                #expect(fileBytes(dir.sub(".lnote/replica.json.corrupt-1")) == Array(damage.utf8), "\(name): the evidence is kept as it was")
                #expect(r.description.contains("damaged") && r.description.contains(nb2.replica.description))
                // The document is still there and writable under the new id.
                let d2 = try await nb2.openDocument(d.id)
                #expect(await d2.title == "kept")
                try await d2.setTitle("again")
                try await d2.close()
                try await nb2.close()
                // The new file is valid: a third opening changes nothing.
                let nb3 = try await openNotebook(dir.path)
                #expect(nb3.replica == nb2.replica && nb3.replicaFileRecovery == nil && nb3.replicaChange == nil, "\(name)")
                try await nb3.close()
                #expect(try Verify.run(folder: dir.path).problems.filter { $0.kind != .orphanAsset }.isEmpty, "\(name)")
            } catch {
                failed += 1
                Issue.record("\(name): \(error)")
            }
            cases += 1
        }
        ReliabilityReport.record(family: "files", detail: "ReplicaFileRecoveryTests.damaged (damaged replica.json)", cases: cases,
                                 corrupted: failed)
    }

    @Test("[PKG-66] a replica.json that is a symlink (to another notebook's) or a directory is set aside, not adopted")
    func notRegular() async throws {
        let dir = try TempDir("replica-link")
        defer { dir.remove() }
        let other = try await openNotebook(dir.sub("other"))
        try await other.close()
        let nb = try await openNotebook(dir.sub("nb"))
        try await nb.close()
        let file = dir.sub("nb/.lnote/replica.json")
        try FileManager.default.removeItem(atPath: file)
        #expect(symlink(dir.sub("other/.lnote/replica.json"), file) == 0)
        let nb2 = try await openNotebook(dir.sub("nb"))
        #expect(nb2.replica != other.replica && nb2.replica != nb.replica)
        #expect(nb2.replicaFileRecovery?.problem.contains("not a regular file (symlink)") == true, "\(String(describing: nb2.replicaFileRecovery))")
        try await nb2.close()
        #expect(Syscalls.live.fileType(atPath: file) == "regular file")
        #expect(Syscalls.live.fileType(atPath: file + ".corrupt-1") == "symlink")

        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.createDirectory(atPath: file, withIntermediateDirectories: false)
        let nb3 = try await openNotebook(dir.sub("nb"))
        #expect(nb3.replicaFileRecovery?.setAside?.hasSuffix("replica.json.corrupt-2") == true)
        try await nb3.close()
        ReliabilityReport.record(family: "files", detail: "ReplicaFileRecoveryTests.notRegular (symlink, directory)", cases: 2)
    }

    @Test("[PKG-60] [PKG-66] a missing replica.json in an existing .lnote mints an id and says so; a new notebook does not")
    func missing() async throws {
        let dir = try TempDir("replica-missing")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        #expect(nb.replicaFileRecovery == nil, "a new notebook is not a recovery")
        try await nb.close()
        try FileManager.default.removeItem(atPath: dir.sub(".lnote/replica.json"))
        let nb2 = try await openNotebook(dir.path)
        let r = try #require(nb2.replicaFileRecovery)
        #expect(r.problem == "missing" && r.setAside == nil && r.minted == nb2.replica && nb2.replica != nb.replica)
        #expect(r.description.contains("missing"))
        try await nb2.close()
        #expect(fileBytes(dir.sub(".lnote/replica.json")) != nil)
    }

    @Test("[PKG-66] a well-formed replica.json of a newer format is refused and left untouched")
    func newerFormat() async throws {
        let dir = try TempDir("replica-newer")
        defer { dir.remove() }
        let nb = try await openNotebook(dir.path)
        try await nb.close()
        let file = dir.sub(".lnote/replica.json")
        let newer = String(decoding: fileBytes(file)!, as: UTF8.self).replacingOccurrences(of: "\"format\" : 1", with: "\"format\" : 2")
        try writeFile(file, Array(newer.utf8))
        await #expect(throws: LnoteError(.unsupportedVersion)) { _ = try await openNotebook(dir.path) }
        #expect(fileBytes(file) == Array(newer.utf8))
        #expect(!FileManager.default.fileExists(atPath: file + ".corrupt-1"))
    }
}
