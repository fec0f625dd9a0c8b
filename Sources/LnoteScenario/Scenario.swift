import Foundation
import LnoteModel

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
        let op = try string(o["op"], "\(path).op")
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
            edit = .add(page: try page(), id: try string(o["id"], "\(path).id"), points: points, below: below, above: above)
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
        default:
            throw fail("unknown op \"\(op)\"", "\(path).op")
        }
        return .edit(at: at, edit, index: i)
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

    func checks(_ o: [String: Any], _ path: String, allowAt: Bool) throws -> Scenario.Checks {
        var allowed: Set<String> = ["pages", "ids", "elements", "pageOrder", "title", "conflicts"]
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
        return c
    }

    func expectation(_ v: Any, replicas: Set<String>) throws -> Scenario.Expectation {
        let o = try object(v, "$.expect")
        var e = Scenario.Expectation()
        e.all = try checks(o, "$.expect", allowAt: true)
        if let c = o["converged"] { e.converged = try bool(c, "$.expect.converged") }
        if let at = o["at"] {
            for (name, ch) in try object(at, "$.expect.at") {
                guard replicas.contains(name) else { throw fail("unknown replica \"\(name)\"", "$.expect.at") }
                e.at[name] = try checks(try object(ch, "$.expect.at.\(name)"), "$.expect.at.\(name)", allowAt: false)
            }
        }
        return e
    }
}
