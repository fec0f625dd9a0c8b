import Foundation
import LnoteModel
import LnoteReplication

/// The outcome of running a scenario.
public struct ScenarioResult: Sendable {
    public var name: String
    public var transport: String
    /// Each unmet expectation, readable.
    public var failures: [String]
    public var passed: Bool { failures.isEmpty }
    /// What each replica showed at the end (replica name → view), for comparing transports.
    public var views: [String: NodeView] = [:]
}

/// Runs scenarios against real replicas through a transport.
public struct ScenarioRunner: Sendable {
    public var transport: any ScenarioTransport
    /// Seeds the "shuffled" delivery order.
    public var seed: UInt64

    public init(transport: any ScenarioTransport, seed: UInt64 = 1) {
        self.transport = transport
        self.seed = seed
    }

    /// Replica ids are assigned in the order the replicas are listed (1, 2, 3, ...), so that
    /// ties between concurrent operations resolve predictably.
    public static func replicaID(index: Int) -> ReplicaID { ReplicaID(UInt64(index + 1)) }

    /// Runs the scenario. Throws only when the scenario cannot be run (an edit names an
    /// element or page that does not exist at that replica, a transport failure); unmet
    /// expectations are returned as failures.
    public func run(_ scenario: Scenario) async throws -> ScenarioResult {
        var names = Names()
        let docID = DocumentID(UUID(uuidString: "5CE4A210-0000-4000-8000-000000000001")!)
        var nodes: [String: any ScenarioNode] = [:]
        var ordered: [any ScenarioNode] = []
        defer { _ = ordered }
        do {
            for (i, r) in scenario.replicas.enumerated() {
                let node = try await transport.makeNode(replica: Self.replicaID(index: i), label: r, document: docID)
                nodes[r] = node
                ordered.append(node)
            }
            var clock = Wall()
            let first = ordered[0]
            _ = try await first.perform(.createDocument(title: scenario.name), wallTime: clock.next())
            var previous: PageID? = nil
            for (k, p) in scenario.pages.enumerated() {
                let id = PageID(UUID(uuidString: String(format: "5CE4A210-0000-4000-8000-%012X", 0x100 + k))!)
                names.pages[p] = id
                _ = try await first.perform(.addPage(id, after: previous), wallTime: clock.next())
                previous = id
            }
            if ordered.count > 1 { try await transport.sync(ordered) }
            var rng = ShuffleRNG(seed: seed)
            // Unmet step expectations (an undo that made another number of operations).
            var stepFailures: [String] = []
            for step in scenario.steps {
                switch step {
                case .edit(let at, let edit, let index):
                    let node = nodes[at]!
                    let path = "$.steps[\(index)]"
                    do {
                        switch edit {
                        case .undo(let page, let makes), .redo(let page, let makes):
                            var redo = false
                            if case .redo = edit { redo = true }
                            let made = try await node.undo(page: try page.map { try names.page($0, "\(path).page") }, redo: redo,
                                                           wallTime: clock.next())
                            if let makes, made != makes {
                                stepFailures.append("\(path): \(at)'s \(redo ? "redo" : "undo") made \(made) operations, expected \(makes)")
                            }
                        case .revert(let page, let to, let makes):
                            let pid = try names.page(page, "\(path).page")
                            let point: HistoryPoint
                            switch to {
                            case .point(let p): point = p
                            case .element(let name):
                                guard let id = names.id(of: name, on: pid) else {
                                    throw ScenarioError("element \"\(name)\" is not on page \(page)", path: "\(path).to")
                                }
                                point = .operation(id)
                            }
                            let made = try await node.revert(page: pid, to: point, wallTime: clock.next())
                            if let makes, made != makes {
                                stepFailures.append("\(path): \(at)'s revert made \(made) operations, expected \(makes)")
                            }
                        case .group(let edits):
                            var resolved: [NodeEdit] = []
                            var adds: [(page: String, name: String)] = []
                            for (k, e) in edits.enumerated() {
                                resolved.append(try names.resolve(e, path: "\(path).edits[\(k)]", index: index))
                                if case .add(let page, let name, _, _, _) = e {
                                    guard !adds.contains(where: { $0.name == name }) else {
                                        throw ScenarioError("element id \"\(name)\" is used twice", path: "\(path).edits[\(k)].id")
                                    }
                                    adds.append((page, name))
                                }
                            }
                            let ids = try await node.performGroup(resolved, wallTime: clock.next())
                            for (a, id) in zip(adds, ids) { names.elements[a.name] = (try names.page(a.page, "\(path).page"), id) }
                        default:
                            let resolved = try names.resolve(edit, path: path, index: index)
                            if let new = try await node.perform(resolved, wallTime: clock.next()),
                               case .add(let page, let name, _, _, _) = edit {
                                names.elements[name] = (try names.page(page, "\(path).page"), new)
                            }
                        }
                    } catch let e as LnoteError {
                        throw ScenarioError("\(at) cannot do this: \(e)", path: path)
                    }
                case .sync(let list, _):
                    try await transport.sync(list.map { nodes[$0]! })
                case .restart(let name, _):
                    try await nodes[name]!.restart()
                case .send(let from, let to, let order, let duplicate, let only, _):
                    let a = nodes[from]!, b = nodes[to]!
                    var ops: [LoggedOp] = []
                    for lo in try await a.heldOps() where !(try await b.contains(lo.log, lo.op.id)) { ops.append(lo) }
                    if let only { ops = Array(ops.prefix(only)) }
                    switch order {
                    case .asHeld: break
                    case .reversed: ops.reverse()
                    case .shuffled: ops.shuffle(using: &rng)
                    }
                    if duplicate { ops += ops }
                    try await transport.deliver(ops, from: a, to: b)
                }
            }
            var views: [String: NodeView] = [:]
            var histories: [String: [PageID: [HistoryStep]]] = [:]
            for r in scenario.replicas {
                views[r] = try await nodes[r]!.view()
                let wanted = Set(scenario.expect.all.history.keys).union(scenario.expect.at[r].map { Array($0.history.keys) } ?? [])
                for name in wanted.sorted() {
                    guard let pid = names.pages[name] else { continue }
                    histories[r, default: [:]][pid] = try await nodes[r]!.history(of: pid)
                }
            }
            let failures = stepFailures
                + Checker(scenario: scenario, names: names, views: views, histories: histories).check()
            for n in ordered { try await n.close() }
            return ScenarioResult(name: scenario.name, transport: transport.name, failures: failures, views: views)
        } catch {
            for n in ordered { try? await n.close() }
            throw error
        }
    }
}

/// Monotonic fake wall clock: scenario results never depend on the machine's time.
struct Wall {
    var now: Int64 = 1_767_225_600_000
    mutating func next() -> Int64 { now += 1000; return now }
}

/// The seeded generator the model ships (SplitMix64): one definition for every test.
typealias ShuffleRNG = SplitMix64

/// Scenario names ↔ ids.
struct Names {
    var pages: [String: PageID] = [:]
    /// Element ids are unique within their page (an id is the add's (replica, counter) in
    /// that page's log), so a name resolves to a page and an id.
    var elements: [String: (page: PageID, id: ElementID)] = [:]

    func page(_ n: String, _ path: String) throws -> PageID {
        guard let p = pages[n] else { throw ScenarioError("unknown page \"\(n)\"", path: path) }
        return p
    }
    func element(_ n: String, _ path: String) throws -> ElementID {
        guard let e = elements[n] else { throw ScenarioError("unknown element \"\(n)\"", path: path) }
        return e.id
    }
    func name(of id: ElementID, on page: PageID) -> String {
        elements.first { $0.value.page == page && $0.value.id == id }?.key ?? id.description
    }
    func id(of name: String, on page: PageID) -> ElementID? {
        guard let e = elements[name], e.page == page else { return nil }
        return e.id
    }
    func name(of id: PageID) -> String { pages.first { $0.value == id }?.key ?? id.description }

    /// The node edit a scenario edit names; `index` is the step's (it gives a new page its id).
    mutating func resolve(_ edit: Scenario.Edit, path: String, index: Int) throws -> NodeEdit {
        func q(_ v: Double, _ what: String) throws -> Int32 {
            do { return try Quantization.coordinate(v) } catch { throw ScenarioError("\(what) \(v) out of range", path: path) }
        }
        switch edit {
        case .add(let p, let id, let points, let below, let above):
            guard elements[id] == nil else { throw ScenarioError("element id \"\(id)\" is used twice", path: "\(path).id") }
            let samples = points.map { InputSample(x: $0.x, y: $0.y, t: $0.t, pressure: $0.pressure) }
            let stroke: Stroke
            do { stroke = try Stroke(samples: samples) } catch { throw ScenarioError("\(error)", path: "\(path).points") }
            return .add(try page(p, "\(path).page"), stroke,
                        below: try below.map { try element($0, "\(path).below") },
                        above: try above.map { try element($0, "\(path).above") })
        case .erase(let p, let ids):
            return .erase(try page(p, "\(path).page"), try ids.map { try element($0, "\(path).ids") })
        case .eraseRange(let p, let id, let from, let to):
            guard let f = UInt32(exactly: from), let t = UInt32(exactly: to) else {
                throw ScenarioError("range out of bounds", path: path)
            }
            return .eraseRange(try page(p, "\(path).page"), try element(id, "\(path).id"), PointRange(f, t))
        case .move(let p, let ids, let dx, let dy):
            return .move(try page(p, "\(path).page"), try ids.map { try element($0, "\(path).ids") },
                         dx: try q(dx, "dx"), dy: try q(dy, "dy"))
        case .toFront(let p, let ids):
            return .toFront(try page(p, "\(path).page"), try ids.map { try element($0, "\(path).ids") })
        case .toBack(let p, let ids):
            return .toBack(try page(p, "\(path).page"), try ids.map { try element($0, "\(path).ids") })
        case .addPage(let p, let after):
            guard pages[p] == nil else { throw ScenarioError("page \"\(p)\" already exists", path: "\(path).page") }
            let a = try after.map { try page($0, "\(path).after") }
            let id = PageID(UUID(uuidString: String(format: "5CE4A210-0000-4000-8000-%012X", 0x1000 + index))!)
            pages[p] = id
            return .addPage(id, after: a)
        case .deletePage(let p):
            return .deletePage(try page(p, "\(path).page"))
        case .movePage(let p, let after):
            return .movePage(try page(p, "\(path).page"), after: try after.map { try page($0, "\(path).after") })
        case .restorePage(let p):
            return .restorePage(try page(p, "\(path).page"))
        case .title(let t):
            return .title(t)
        case .restore(let p, let ids):
            return .restore(try page(p, "\(path).page"), try ids.map { try element($0, "\(path).ids") })
        case .restoreRange(let p, let id, let from, let to):
            guard let f = UInt32(exactly: from), let t = UInt32(exactly: to) else {
                throw ScenarioError("range out of bounds", path: path)
            }
            return .restoreRange(try page(p, "\(path).page"), try element(id, "\(path).id"), PointRange(f, t))
        case .undo, .redo, .revert, .group:
            throw ScenarioError("not a single edit", path: path)
        }
    }
}

/// Compares what replicas show with what the scenario expects.
struct Checker {
    let scenario: Scenario
    let names: Names
    let views: [String: NodeView]
    /// Replica → page → its history, for the pages a `history` expectation names.
    var histories: [String: [PageID: [HistoryStep]]] = [:]

    func check() -> [String] {
        var out: [String] = []
        if scenario.expect.converged == true {
            let first = scenario.replicas[0]
            for r in scenario.replicas.dropFirst() {
                out += difference(first, r)
            }
        }
        if scenario.expect.converged == false {
            let v0 = views[scenario.replicas[0]]!
            if scenario.replicas.dropFirst().allSatisfy({ views[$0]! == v0 }) {
                out.append("expected the replicas to differ, but they are all equal")
            }
        }
        for r in scenario.replicas { out += check(scenario.expect.all, at: r) }
        for (r, c) in scenario.expect.at.sorted(by: { $0.key < $1.key }) { out += check(c, at: r) }
        return out
    }

    func difference(_ a: String, _ b: String) -> [String] {
        let va = views[a]!, vb = views[b]!
        if va == vb { return [] }
        var out: [String] = []
        if va.document != vb.document {
            out.append("not converged: document differs between \(a) and \(b): "
                + "pages \(order(va)) vs \(order(vb)), title \"\(va.document.title.value)\" vs \"\(vb.document.title.value)\"")
        }
        for p in Set(va.pages.keys).union(vb.pages.keys).sorted() where va.pages[p] != vb.pages[p] {
            out.append("not converged: page \(names.name(of: p)) differs between \(a) and \(b): "
                + "\(describe(va.pages[p])) vs \(describe(vb.pages[p]))")
        }
        if va.conflicts != vb.conflicts {
            out.append("not converged: conflict reports differ between \(a) (\(va.conflicts.count)) and \(b) (\(vb.conflicts.count))")
        }
        if va.canonical != vb.canonical, out.isEmpty {
            out.append("not converged: canonical text differs between \(a) and \(b)")
        }
        return out.isEmpty ? ["not converged: \(a) and \(b) differ"] : out
    }

    func order(_ v: NodeView) -> [String] { v.document.livePages.map { names.name(of: $0.id) } }

    func describe(_ s: PageState?) -> String {
        guard let s else { return "(no page)" }
        return "[" + s.elements.map { e in
            "\(names.name(of: e.id, on: s.page)) visible \(e.visibleRanges.map { [$0.from, $0.to] }) at (\(Double(e.transform.value.tx) / 10), \(Double(e.transform.value.ty) / 10))"
        }.joined(separator: ", ") + "]"
    }

    func mismatch(_ want: Scenario.ElementExpectation, _ got: ElementRecord, on page: PageID) -> String? {
        var why: [String] = []
        if let id = want.id, names.id(of: id, on: page) != got.id {
            why.append("id is \(names.name(of: got.id, on: page)), expected \(id)")
        }
        if let v = want.visible {
            let have = got.visibleRanges.map { [Int($0.from), Int($0.to)] }
            if have != v { why.append("visible \(have), expected \(v)") }
        }
        if let dx = want.dx, (try? Quantization.coordinate(dx)) != got.transform.value.tx {
            why.append("dx \(Double(got.transform.value.tx) / 10), expected \(dx)")
        }
        if let dy = want.dy, (try? Quantization.coordinate(dy)) != got.transform.value.ty {
            why.append("dy \(Double(got.transform.value.ty) / 10), expected \(dy)")
        }
        return why.isEmpty ? nil : why.joined(separator: "; ")
    }

    func check(_ c: Scenario.Checks, at r: String) -> [String] {
        let v = views[r]!
        var out: [String] = []
        /// The page as drawn: elements with no visible ink left are absent.
        func page(_ name: String) -> PageState? {
            guard let id = names.pages[name] else { return nil }
            var s = v.pages[id] ?? PageState(page: id)
            s.elements.removeAll { $0.isFullyErasedInk }
            return s
        }
        for (name, want) in c.pages.sorted(by: { $0.key < $1.key }) {
            guard let s = page(name) else { out.append("\(r): unknown page \(name)"); continue }
            if s.elements.count != want.count {
                out.append("\(r): page \(name) has \(s.elements.count) elements \(describe(s)), expected \(want.count)")
                continue
            }
            for (k, (w, e)) in zip(want, s.elements).enumerated() {
                if let m = mismatch(w, e, on: s.page) {
                    out.append("\(r): page \(name) element \(k) (\(names.name(of: e.id, on: s.page))): \(m)")
                }
            }
        }
        for (name, want) in c.ids.sorted(by: { $0.key < $1.key }) {
            guard let s = page(name) else { out.append("\(r): unknown page \(name)"); continue }
            let have = Set(s.elements.map { names.name(of: $0.id, on: s.page) })
            if have != Set(want) { out.append("\(r): page \(name) holds \(have.sorted()), expected \(Set(want).sorted())") }
        }
        for (name, want) in c.elements.sorted(by: { $0.key < $1.key }) {
            guard let s = page(name) else { out.append("\(r): unknown page \(name)"); continue }
            for (id, w) in want.sorted(by: { $0.key < $1.key }) {
                guard let eid = names.id(of: id, on: s.page), let e = s.elements.first(where: { $0.id == eid }) else {
                    out.append("\(r): page \(name) has no element \(id)")
                    continue
                }
                if let m = mismatch(w, e, on: s.page) { out.append("\(r): page \(name) element \(id): \(m)") }
            }
        }
        if let po = c.pageOrder, order(v) != po { out.append("\(r): page order \(order(v)), expected \(po)") }
        if let t = c.title, v.document.title.value != t { out.append("\(r): title \"\(v.document.title.value)\", expected \"\(t)\"") }
        switch c.conflicts {
        case .count(let n)?:
            if v.conflicts.count != n {
                out.append("\(r): \(v.conflicts.count) conflicts \(v.conflicts.map { conflictText($0) }), expected \(n)")
            }
        case .elements(let ids)?:
            let have = Set(v.conflicts.compactMap { c in c.element.map { names.name(of: $0, on: c.page!) } })
            if have != Set(ids) { out.append("\(r): conflicts on \(have.sorted()), expected \(Set(ids).sorted())") }
        case nil: break
        }
        for (name, want) in c.history.sorted(by: { $0.key < $1.key }) {
            guard let pid = names.pages[name] else { out.append("\(r): unknown page \(name)"); continue }
            let steps = histories[r]?[pid] ?? []
            if let m = historyMismatch(want, steps, page: pid) { out.append("\(r): page \(name) history \(m)") }
        }
        return out
    }

    /// The replica name of a replica id (ids are 1, 2, 3 … in the order listed).
    func replicaName(_ id: ReplicaID) -> String {
        let i = Int(id.rawValue) - 1
        return scenario.replicas.indices.contains(i) ? scenario.replicas[i] : id.description
    }

    func stepText(_ s: HistoryStep, page: PageID) -> String {
        "\(s.kind) by \(replicaName(s.author))" + (s.elements.isEmpty ? "" : " " + s.elements.map { names.name(of: $0, on: page) }.joined(separator: " "))
    }

    func historyMismatch(_ want: Scenario.HistoryExpectation, _ steps: [HistoryStep], page: PageID) -> String? {
        let have = "[" + steps.map { stepText($0, page: page) }.joined(separator: ", ") + "]"
        switch want {
        case .steps(let list):
            guard list.count == steps.count else { return "has \(steps.count) steps \(have), expected \(list.count)" }
            var why: [String] = []
            for (k, (w, s)) in zip(list, steps).enumerated() {
                var bad = w.kind != s.kind
                if let by = w.by, by != replicaName(s.author) { bad = true }
                if let els = w.elements, els.map({ names.id(of: $0, on: page) }) != s.elements.map(Optional.some) { bad = true }
                if bad {
                    let expected = w.kind + (w.by.map { " by \($0)" } ?? "") + (w.elements.map { " " + $0.joined(separator: " ") } ?? "")
                    why.append("step \(k) is \(stepText(s, page: page)), expected \(expected)")
                }
            }
            return why.isEmpty ? nil : why.joined(separator: "; ") + " (all: \(have))"
        case .counts(let total, let kinds):
            var why: [String] = []
            if let total, total != steps.count { why.append("has \(steps.count) steps, expected \(total)") }
            for (kind, n) in kinds.sorted(by: { $0.key < $1.key }) {
                let got = steps.filter { $0.kind == kind }.count
                if got != n { why.append("has \(got) \(kind) steps, expected \(n)") }
            }
            return why.isEmpty ? nil : why.joined(separator: "; ") + " \(have)"
        }
    }

    func conflictText(_ c: Conflict) -> String {
        var s = c.kind.rawValue
        if let e = c.element, let p = c.page { s += " " + names.name(of: e, on: p) }
        else if let p = c.page { s += " " + names.name(of: p) }
        return s
    }
}
