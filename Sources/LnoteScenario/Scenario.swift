import Foundation
import LnoteModel
import LnoteReplication

/// A conflict scenario: replicas, the pages they start with, steps (edits and deliveries)
/// and the expected outcome. The JSON format is specified in `Protocol/scenarios.md`.
public struct Scenario: Sendable {
    public var name: String
    public var replicas: [String]
    public var pages: [String]
    public var steps: [Step]
    public var expect: Expectation

    public enum Order: String, Sendable { case asHeld = "held", reversed, shuffled }

    public enum Step: Sendable {
        case edit(at: String, Edit, index: Int)
        case sync([String], index: Int)
        case send(from: String, to: String, order: Order, duplicate: Bool, only: Int?, index: Int)
        /// The replica saves, closes and reopens its document from what it stored (a process
        /// restart: snapshots and logs read back).
        case restart(String, index: Int)
    }

    /// A point as written in a scenario: points (pt), pressure 0...1, time ms.
    public struct Point: Sendable, Equatable {
        public var x: Double, y: Double, pressure: Double?, t: Double?
    }

    public enum Edit: Sendable {
        case add(page: String, id: String, points: [Point], below: String?, above: String?)
        case erase(page: String, ids: [String])
        case eraseRange(page: String, id: String, from: Int, to: Int)
        case move(page: String, ids: [String], dx: Double, dy: Double)
        case toFront(page: String, ids: [String])
        case toBack(page: String, ids: [String])
        case addPage(page: String, after: String?)
        case deletePage(page: String)
        case movePage(page: String, after: String?)
        case restorePage(page: String)
        case title(String)
        /// Brings back elements erased whole ([MERGE-70]).
        case restore(page: String, ids: [String])
        /// Brings back the erased points `[from, to)` of a stroke ([MERGE-71]).
        case restoreRange(page: String, id: String, from: Int, to: Int)
        /// Makes the page as it was at a moment ([MERGE-76]), as one undo step. `makes`: the
        /// number of operations it must make, when given.
        case revert(page: String, to: Moment, makes: Int?)
        /// Takes back the replica's latest step (of `page` when given) ([MERGE-73], [MERGE-74]).
        case undo(page: String?, makes: Int?)
        /// Does again the step the latest undo took back.
        case redo(page: String?, makes: Int?)
        /// Page edits made as one undo step (one app action: an import, a selection).
        case group([Edit])
    }

    /// A moment of a page's history as a scenario names it.
    public enum Moment: Sendable, Equatable {
        /// Just after the add of this element (by its author): the add's context plus its id.
        case element(String)
        /// A moment as `HistoryPoint(parsing:)` reads it (an operation id, a clock, a time).
        case point(HistoryPoint)
    }

    /// One expected step of a page's history ([MERGE-84]); absent keys are not checked.
    public struct HistoryStepExpectation: Sendable, Equatable {
        public var kind: String
        /// The author's replica name.
        public var by: String?
        /// The elements it names, in order.
        public var elements: [String]?
        public init(kind: String, by: String? = nil, elements: [String]? = nil) {
            self.kind = kind
            self.by = by
            self.elements = elements
        }
    }

    public enum HistoryExpectation: Sendable, Equatable {
        /// Every step of the page's log, in the replica's log order.
        case steps([HistoryStepExpectation])
        /// How many steps, and how many of each kind named (any order).
        case counts(total: Int?, kinds: [String: Int])
    }

    /// Expected per-element facts; absent keys are not checked.
    public struct ElementExpectation: Sendable, Equatable {
        public var id: String?
        public var visible: [[Int]]?
        public var dx: Double?
        public var dy: Double?
    }

    public enum ConflictExpectation: Sendable, Equatable {
        case count(Int)
        case elements([String])
    }

    public struct Checks: Sendable {
        public var pages: [String: [ElementExpectation]] = [:]
        public var ids: [String: [String]] = [:]
        public var elements: [String: [String: ElementExpectation]] = [:]
        public var pageOrder: [String]?
        public var title: String?
        public var conflicts: ConflictExpectation?
        /// Page name → its history.
        public var history: [String: HistoryExpectation] = [:]
    }

    public struct Expectation: Sendable {
        public var converged: Bool?
        public var all = Checks()
        /// Replica name → checks for that replica only.
        public var at: [String: Checks] = [:]
    }
}

/// A scenario file that cannot be run: the message names the JSON path.
public struct ScenarioError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var path: String?
    public init(_ message: String, path: String? = nil) {
        self.message = message
        self.path = path
    }
    public var description: String { path.map { "\($0): \(message)" } ?? message }
}

extension Scenario {
    /// Parses a scenario file; every error names the file and the JSON path.
    public static func load(contentsOf url: URL) throws -> Scenario {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw ScenarioError("cannot read: \(error.localizedDescription)", path: url.path)
        }
        do { return try parse(data) } catch let e as ScenarioError {
            throw ScenarioError(e.message, path: url.lastPathComponent + (e.path.map { " " + $0 } ?? ""))
        }
    }

    public static func parse(_ data: Data) throws -> Scenario {
        let root: Any
        do { root = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) } catch {
            throw ScenarioError("not valid JSON (\((error as NSError).localizedDescription))")
        }
        var p = Parser()
        return try p.scenario(root)
    }
}

/// A small typed walker over JSONSerialization output that reports JSON paths.
private struct Parser {
    /// Element ids named by the adds parsed so far (a revert's `to` may name one).
    var added: Set<String> = []

    func fail(_ m: String, _ path: String) -> ScenarioError { ScenarioError(m, path: path) }

    func object(_ v: Any?, _ path: String) throws -> [String: Any] {
        guard let o = v as? [String: Any] else { throw fail("expected an object", path) }
        return o
    }
    func array(_ v: Any?, _ path: String) throws -> [Any] {
        guard let a = v as? [Any] else { throw fail("expected an array", path) }
        return a
    }
    func string(_ v: Any?, _ path: String) throws -> String {
        guard let s = v as? String, !s.isEmpty else { throw fail("expected a non-empty string", path) }
        return s
    }
    /// JSONSerialization gives booleans as NSNumber too; they are told apart by class.
    static func isBoolean(_ v: Any) -> Bool {
        type(of: v) == Bool.self || String(describing: type(of: v)) == "__NSCFBoolean"
    }
    func number(_ v: Any?, _ path: String) throws -> Double {
        guard let v, !Parser.isBoolean(v), let n = v as? NSNumber, n.doubleValue.isFinite else {
            throw fail("expected a number", path)
        }
        return n.doubleValue
    }
    func int(_ v: Any?, _ path: String) throws -> Int {
        let d = try number(v, path)
        guard d == d.rounded(), abs(d) < 1e15 else { throw fail("expected an integer", path) }
        return Int(d)
    }
    func strings(_ v: Any?, _ path: String) throws -> [String] {
        try array(v, path).enumerated().map { try string($1, "\(path)[\($0)]") }
    }
    func optionalString(_ o: [String: Any], _ key: String, _ path: String) throws -> String? {
        guard let v = o[key], !(v is NSNull) else { return nil }
        return try string(v, "\(path).\(key)")
    }
    func bool(_ v: Any?, _ path: String) throws -> Bool {
        guard let v, Parser.isBoolean(v), let b = v as? Bool else { throw fail("expected true or false", path) }
        return b
    }
    func checkKeys(_ o: [String: Any], _ allowed: Set<String>, _ path: String) throws {
        for k in o.keys.sorted() where !allowed.contains(k) { throw fail("unknown key \"\(k)\"", path) }
    }

    mutating func scenario(_ root: Any) throws -> Scenario {
        let o = try object(root, "$")
        try checkKeys(o, ["name", "replicas", "pages", "steps", "expect", "description"], "$")
        let name = try string(o["name"], "$.name")
        let replicas = try strings(o["replicas"], "$.replicas")
        guard !replicas.isEmpty, Set(replicas).count == replicas.count else {
            throw fail("replicas must be a non-empty list of distinct names", "$.replicas")
        }
        let pages = o["pages"] == nil ? [] : try strings(o["pages"], "$.pages")
        guard Set(pages).count == pages.count else { throw fail("duplicate page names", "$.pages") }
        let rawSteps = try array(o["steps"] ?? [Any](), "$.steps")
        var steps: [Scenario.Step] = []
        for (i, s) in rawSteps.enumerated() {
            steps.append(try step(s, index: i, replicas: Set(replicas)))
        }
        let expect = try expectation(o["expect"] ?? [String: Any](), replicas: Set(replicas))
        return Scenario(name: name, replicas: replicas, pages: pages, steps: steps, expect: expect)
    }

    func replica(_ v: Any?, _ path: String, _ replicas: Set<String>) throws -> String {
        let r = try string(v, path)
        guard replicas.contains(r) else { throw fail("unknown replica \"\(r)\"", path) }
        return r
    }

    mutating func step(_ v: Any, index i: Int, replicas: Set<String>) throws -> Scenario.Step {
        let path = "$.steps[\(i)]"
        let o = try object(v, path)
        if let sync = o["sync"] {
            try checkKeys(o, ["sync"], path)
            let names = try strings(sync, "\(path).sync")
            for (k, n) in names.enumerated() where !replicas.contains(n) {
                throw fail("unknown replica \"\(n)\"", "\(path).sync[\(k)]")
            }
            guard names.count >= 2 else { throw fail("sync needs at least two replicas", "\(path).sync") }
            return .sync(names, index: i)
        }
        if o["restart"] != nil {
            try checkKeys(o, ["restart"], path)
            return .restart(try replica(o["restart"], "\(path).restart", replicas), index: i)
        }
        if o["send"] != nil {
            try checkKeys(o, ["send", "to", "order", "duplicate", "only"], path)
            let from = try replica(o["send"], "\(path).send", replicas)
            let to = try replica(o["to"], "\(path).to", replicas)
            guard from != to else { throw fail("send and to name the same replica", path) }
            var order = Scenario.Order.asHeld
            if let ov = o["order"] {
                let s = try string(ov, "\(path).order")
                guard let ord = Scenario.Order(rawValue: s) else {
                    throw fail("order must be \"held\", \"reversed\" or \"shuffled\"", "\(path).order")
                }
                order = ord
            }
            let dup = try o["duplicate"].map { try bool($0, "\(path).duplicate") } ?? false
            var only: Int? = nil
            if let ov = o["only"] {
                only = try int(ov, "\(path).only")
                guard only! >= 0 else { throw fail("only must be ≥ 0", "\(path).only") }
            }
            return .send(from: from, to: to, order: order, duplicate: dup, only: only, index: i)
        }
        let at = try replica(o["at"], "\(path).at", replicas)
        return .edit(at: at, try edit(o, path, base: ["at"], inGroup: false), index: i)
    }

    /// The page kinds of operation a history names ([MERGE-84]).
    static let pageKinds: Set<String> = ["add", "erase", "eraseRange", "move", "reorder", "restore", "restoreRange"]

    /// The edit an object names; `base` are the keys allowed besides `op` and the edit's own
    /// (`at` for a step, none for an edit of a group).
    mutating func edit(_ o: [String: Any], _ path: String, base: Set<String>, inGroup: Bool) throws -> Scenario.Edit {
        let op = try string(o["op"], "\(path).op")
        func checkKeys(_ o: [String: Any], _ own: Set<String>, _ path: String) throws {
            try self.checkKeys(o, own.subtracting(["at"]).union(base).union(["op"]), path)
        }
        func makes() throws -> Int? {
            guard let v = o["makes"] else { return nil }
            let n = try int(v, "\(path).makes")
            guard n >= 0 else { throw fail("makes must be ≥ 0", "\(path).makes") }
            return n
        }
        func page() throws -> String { try string(o["page"], "\(path).page") }
        func ids() throws -> [String] {
            let a = try strings(o["ids"], "\(path).ids")
            guard !a.isEmpty else { throw fail("ids is empty", "\(path).ids") }
            return a
        }
        let edit: Scenario.Edit
        switch op {
        case "add":
            try checkKeys(o, ["at", "op", "page", "id", "points", "below", "above"], path)
            let pts = try array(o["points"], "\(path).points")
            guard !pts.isEmpty else { throw fail("a stroke needs at least one point", "\(path).points") }
            let points = try pts.enumerated().map { k, p -> Scenario.Point in
                let pp = "\(path).points[\(k)]"
                let a = try array(p, pp)
                guard a.count == 2 || a.count == 4 else { throw fail("a point is [x, y] or [x, y, pressure, t]", pp) }
                let x = try number(a[0], "\(pp)[0]"), y = try number(a[1], "\(pp)[1]")
                if a.count == 2 { return Scenario.Point(x: x, y: y, pressure: nil, t: nil) }
                let pr: Double? = a[2] is NSNull ? nil : try number(a[2], "\(pp)[2]")
                let t: Double? = a[3] is NSNull ? nil : try number(a[3], "\(pp)[3]")
                if let pr, !(0...1).contains(pr) { throw fail("pressure must be within 0...1", "\(pp)[2]") }
                return Scenario.Point(x: x, y: y, pressure: pr, t: t)
            }
            let below = try optionalString(o, "below", path), above = try optionalString(o, "above", path)
            guard below == nil || above == nil else { throw fail("give below or above, not both", path) }
            let id = try string(o["id"], "\(path).id")
            added.insert(id)
            edit = .add(page: try page(), id: id, points: points, below: below, above: above)
        case "erase":
            try checkKeys(o, ["at", "op", "page", "ids"], path)
            edit = .erase(page: try page(), ids: try ids())
        case "eraseRange":
            try checkKeys(o, ["at", "op", "page", "id", "from", "to"], path)
            let from = try int(o["from"], "\(path).from"), to = try int(o["to"], "\(path).to")
            guard from >= 0, to > from else { throw fail("need 0 ≤ from < to", path) }
            edit = .eraseRange(page: try page(), id: try string(o["id"], "\(path).id"), from: from, to: to)
        case "move":
            try checkKeys(o, ["at", "op", "page", "ids", "dx", "dy"], path)
            edit = .move(page: try page(), ids: try ids(), dx: try number(o["dx"] ?? 0, "\(path).dx"),
                         dy: try number(o["dy"] ?? 0, "\(path).dy"))
        case "toFront":
            try checkKeys(o, ["at", "op", "page", "ids"], path)
            edit = .toFront(page: try page(), ids: try ids())
        case "toBack":
            try checkKeys(o, ["at", "op", "page", "ids"], path)
            edit = .toBack(page: try page(), ids: try ids())
        case "addPage":
            try checkKeys(o, ["at", "op", "page", "after"], path)
            edit = .addPage(page: try page(), after: try optionalString(o, "after", path))
        case "deletePage":
            try checkKeys(o, ["at", "op", "page"], path)
            edit = .deletePage(page: try page())
        case "movePage":
            try checkKeys(o, ["at", "op", "page", "after"], path)
            guard o.keys.contains("after") else { throw fail("movePage needs \"after\" (a page or null)", path) }
            edit = .movePage(page: try page(), after: try optionalString(o, "after", path))
        case "restorePage":
            try checkKeys(o, ["at", "op", "page"], path)
            edit = .restorePage(page: try page())
        case "title":
            try checkKeys(o, ["at", "op", "text"], path)
            guard let t = o["text"] as? String else { throw fail("expected a string", "\(path).text") }
            edit = .title(t)
        case "restore":
            try checkKeys(o, ["at", "op", "page", "ids"], path)
            edit = .restore(page: try page(), ids: try ids())
        case "restoreRange":
            try checkKeys(o, ["at", "op", "page", "id", "from", "to"], path)
            let from = try int(o["from"], "\(path).from"), to = try int(o["to"], "\(path).to")
            guard from >= 0, to > from else { throw fail("need 0 ≤ from < to", path) }
            edit = .restoreRange(page: try page(), id: try string(o["id"], "\(path).id"), from: from, to: to)
        case "revert":
            try checkKeys(o, ["at", "op", "page", "to", "makes"], path)
            let to = try string(o["to"], "\(path).to")
            let moment: Scenario.Moment
            if added.contains(to) {
                moment = .element(to)
            } else if let point = HistoryPoint(parsing: to) {
                moment = .point(point)
            } else {
                throw fail("expected the id of an element an earlier step added, or a moment: \(HistoryPoint.forms)", "\(path).to")
            }
            edit = .revert(page: try page(), to: moment, makes: try makes())
        case "undo", "redo":
            try checkKeys(o, ["at", "op", "page", "makes"], path)
            let p = try optionalString(o, "page", path)
            edit = op == "undo" ? .undo(page: p, makes: try makes()) : .redo(page: p, makes: try makes())
        case "group":
            guard !inGroup else { throw fail("groups do not nest", "\(path).op") }
            try checkKeys(o, ["at", "op", "edits"], path)
            let list = try array(o["edits"], "\(path).edits")
            guard !list.isEmpty else { throw fail("edits is empty", "\(path).edits") }
            var edits: [Scenario.Edit] = []
            for (k, e) in list.enumerated() {
                let ep = "\(path).edits[\(k)]"
                let inner = try self.edit(try object(e, ep), ep, base: [], inGroup: true)
                switch inner {
                case .add, .erase, .eraseRange, .move, .toFront, .toBack, .restore, .restoreRange: break
                default:
                    throw fail("a group holds page edits only (add, erase, eraseRange, move, toFront, toBack, restore, restoreRange)",
                               "\(ep).op")
                }
                edits.append(inner)
            }
            edit = .group(edits)
        default:
            throw fail("unknown op \"\(op)\"", "\(path).op")
        }
        return edit
    }

    func elementExpectation(_ v: Any, _ path: String) throws -> Scenario.ElementExpectation {
        let o = try object(v, path)
        try checkKeys(o, ["id", "visible", "dx", "dy"], path)
        var e = Scenario.ElementExpectation()
        e.id = try optionalString(o, "id", path)
        if let vis = o["visible"] {
            e.visible = try array(vis, "\(path).visible").enumerated().map { k, r in
                let rp = "\(path).visible[\(k)]"
                let a = try array(r, rp)
                guard a.count == 2 else { throw fail("a range is [from, to]", rp) }
                return [try int(a[0], "\(rp)[0]"), try int(a[1], "\(rp)[1]")]
            }
        }
        if let dx = o["dx"] { e.dx = try number(dx, "\(path).dx") }
        if let dy = o["dy"] { e.dy = try number(dy, "\(path).dy") }
        return e
    }

    func checks(_ o: [String: Any], _ path: String, allowAt: Bool, replicas: Set<String>) throws -> Scenario.Checks {
        var allowed: Set<String> = ["pages", "ids", "elements", "pageOrder", "title", "conflicts", "history"]
        if allowAt { allowed.formUnion(["converged", "at"]) }
        try checkKeys(o, allowed, path)
        var c = Scenario.Checks()
        if let pages = o["pages"] {
            for (name, list) in try object(pages, "\(path).pages") {
                c.pages[name] = try array(list, "\(path).pages.\(name)").enumerated().map {
                    try elementExpectation($1, "\(path).pages.\(name)[\($0)]")
                }
            }
        }
        if let ids = o["ids"] {
            for (name, list) in try object(ids, "\(path).ids") { c.ids[name] = try strings(list, "\(path).ids.\(name)") }
        }
        if let els = o["elements"] {
            for (name, m) in try object(els, "\(path).elements") {
                var byID: [String: Scenario.ElementExpectation] = [:]
                for (id, e) in try object(m, "\(path).elements.\(name)") {
                    byID[id] = try elementExpectation(e, "\(path).elements.\(name).\(id)")
                }
                c.elements[name] = byID
            }
        }
        if let po = o["pageOrder"] { c.pageOrder = try strings(po, "\(path).pageOrder") }
        if let t = o["title"] {
            guard let s = t as? String else { throw fail("expected a string", "\(path).title") }
            c.title = s
        }
        if let cf = o["conflicts"] {
            if cf is [Any] { c.conflicts = .elements(try strings(cf, "\(path).conflicts")) }
            else {
                let n = try int(cf, "\(path).conflicts")
                guard n >= 0 else { throw fail("conflict count must be ≥ 0", "\(path).conflicts") }
                c.conflicts = .count(n)
            }
        }
        if let h = o["history"] {
            for (name, v) in try object(h, "\(path).history") {
                c.history[name] = try history(v, "\(path).history.\(name)", replicas: replicas)
            }
        }
        return c
    }

    func kind(_ v: Any?, _ path: String) throws -> String {
        let k = try string(v, path)
        guard Parser.pageKinds.contains(k) else {
            throw fail("unknown kind \"\(k)\" (have: \(Parser.pageKinds.sorted().joined(separator: ", ")))", path)
        }
        return k
    }

    /// A list of steps (each a kind, or `{"kind", "by", "elements"}`), or `{"count", "kinds"}`.
    func history(_ v: Any, _ path: String, replicas: Set<String>) throws -> Scenario.HistoryExpectation {
        if let list = v as? [Any] {
            return .steps(try list.enumerated().map { k, item in
                let sp = "\(path)[\(k)]"
                if item is String { return Scenario.HistoryStepExpectation(kind: try kind(item, sp)) }
                let so = try object(item, sp)
                try checkKeys(so, ["kind", "by", "elements"], sp)
                var e = Scenario.HistoryStepExpectation(kind: try kind(so["kind"], "\(sp).kind"))
                if so["by"] != nil { e.by = try replica(so["by"], "\(sp).by", replicas) }
                if let els = so["elements"] { e.elements = try strings(els, "\(sp).elements") }
                return e
            })
        }
        guard let o = v as? [String: Any] else {
            throw fail("expected a list of steps or {\"count\", \"kinds\"}", path)
        }
        try checkKeys(o, ["count", "kinds"], path)
        var total: Int? = nil
        if let c = o["count"] {
            total = try int(c, "\(path).count")
            guard total! >= 0 else { throw fail("count must be ≥ 0", "\(path).count") }
        }
        var kinds: [String: Int] = [:]
        if let ks = o["kinds"] {
            for (k, n) in try object(ks, "\(path).kinds") {
                _ = try kind(k, "\(path).kinds.\(k)")
                let count = try int(n, "\(path).kinds.\(k)")
                guard count >= 0 else { throw fail("a count must be ≥ 0", "\(path).kinds.\(k)") }
                kinds[k] = count
            }
        }
        return .counts(total: total, kinds: kinds)
    }

    func expectation(_ v: Any, replicas: Set<String>) throws -> Scenario.Expectation {
        let o = try object(v, "$.expect")
        var e = Scenario.Expectation()
        e.all = try checks(o, "$.expect", allowAt: true, replicas: replicas)
        if let c = o["converged"] { e.converged = try bool(c, "$.expect.converged") }
        if let at = o["at"] {
            for (name, ch) in try object(at, "$.expect.at") {
                guard replicas.contains(name) else { throw fail("unknown replica \"\(name)\"", "$.expect.at") }
                e.at[name] = try checks(try object(ch, "$.expect.at.\(name)"), "$.expect.at.\(name)", allowAt: false,
                                        replicas: replicas)
            }
        }
        return e
    }
}
