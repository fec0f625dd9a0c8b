import Foundation
import Synchronization
import Testing
import LnoteModel
@testable import LnoteReplication

/// `ElementTable` keeps records in dense slots with an explicit z order only once an erase
/// or a reorder needs one. Checked against the plainest model of what it must be: an array
/// kept sorted by position, searched linearly.
@Suite struct ElementTableTests {
    static func record(_ id: ElementID, layer: Int64, fraction: [UInt8] = []) -> ElementRecord {
        ElementRecord(id: id, lamport: id.counter, wallTime: 0,
                      content: .stroke(Stroke(points: [StrokePoint(x: 1, y: 2, t: 0)])),
                      z: LWWRegister(ZKey(layer: layer, fraction: fraction)))
    }

    /// A table of `records` (in z order): built, or (`unbuilt`, when there are records) as a
    /// listing open starts it, from records not built yet; `builds` counts their builds.
    static func table(_ records: [ElementRecord], unbuilt: Bool, builds: BuildCount? = nil) -> ElementTable {
        guard unbuilt, let top = records.last else { return ElementTable(ordered: records) }
        return ElementTable(ordered: [], unbuilt: UnbuiltRecords(ids: records.map(\.id), top: (top.z.value, top.id)) {
            builds?.count.withLock { $0 += 1 }
            return (records, nil)
        })
    }

    final class BuildCount: Sendable {
        let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
    }

    @Test("random inserts, removals, repositions and updates keep the table equal to a sorted reference, built or unbuilt at the start")
    func matchesSortedReference() {
        for seed: UInt64 in 1...40 {
            var rng = SplitMix64(seed: seed)
            // Start from a snapshot-like ordered array (sometimes empty).
            var reference: [ElementRecord] = []
            var next: UInt64 = 1
            let initial = Int(rng.next() % 50)
            for _ in 0..<initial {
                reference.append(Self.record(OpID(replica: ReplicaID(1 + rng.next() % 3), counter: next), layer: Int64(next)))
                next += 1
            }
            reference.sort(by: ElementRecord.zLess)
            // Odd seeds start as a listing open does: the records checked, not built.
            var table = Self.table(reference, unbuilt: seed % 2 == 1)
            for step in 0..<300 {
                let roll = rng.next() % 100
                if roll < 45 || reference.isEmpty {
                    // Mostly on top, sometimes anywhere (a layer below the top, or a fraction).
                    let layer = roll < 30 ? Int64(next) : Int64(rng.next() % (next + 1)) - Int64(next / 2)
                    let fraction: [UInt8] = rng.next() % 3 == 0 ? [UInt8(1 + rng.next() % 250)] : []
                    let r = Self.record(OpID(replica: ReplicaID(1 + rng.next() % 3), counter: next), layer: layer, fraction: fraction)
                    next += 1
                    // Sometimes with the next ones on top, as one batch (`insert(count:)`).
                    var made = [r]
                    if rng.next() % 4 == 0 {
                        for _ in 0..<Int(rng.next() % 5) {
                            made.append(Self.record(OpID(replica: ReplicaID(1 + rng.next() % 3), counter: next), layer: Int64(next)))
                            next += 1
                        }
                        table.insert(count: made.count) { made[$0] }
                    } else {
                        // Sometimes as part of a batch: placed in the z order when it settles.
                        table.insert(deferring: rng.next() % 2 == 0, r)
                    }
                    reference += made
                    reference.sort(by: ElementRecord.zLess)
                } else if roll < 70 && rng.next() % 3 == 0 {
                    // Several at once (an erase or a reorder of many), with ids not live among them.
                    var ids = reference.indices.shuffled(using: &rng).prefix(Int(rng.next() % 30)).map { reference[$0].id }
                    for _ in 0..<Int(rng.next() % 3) {
                        ids.insert(OpID(replica: ReplicaID(99), counter: next + rng.next() % 1000), at: Int(rng.next() % UInt64(ids.count + 1)))
                    }
                    let expected = ids.map { id in reference.first { $0.id == id } }
                    let removed = table.remove(all: ids)
                    #expect(removed == expected, "seed \(seed) step \(step): removed the wrong records")
                    reference.removeAll { r in ids.contains(r.id) }
                    // Sometimes put back at new places as one batch (a reorder).
                    if rng.next() % 2 == 0 {
                        for r in removed.compactMap({ $0 }) {
                            var r = r
                            r.z = LWWRegister(ZKey(layer: Int64(rng.next() % (next + 1)) - Int64(next / 2)))
                            table.insert(deferring: true, r)
                            reference.append(r)
                        }
                        table.settle()
                        reference.sort(by: ElementRecord.zLess)
                    }
                } else if roll < 70 {
                    let i = Int(rng.next() % UInt64(reference.count))
                    let removed = table.remove(reference[i].id)
                    #expect(removed == reference[i], "seed \(seed) step \(step): removed the wrong record")
                    reference.remove(at: i)
                } else if roll < 85 {
                    let i = Int(rng.next() % UInt64(reference.count))
                    let layer = Int64(rng.next() % (next + 1)) - Int64(next / 2)
                    let id = reference[i].id
                    table.reposition(id) { $0.z = LWWRegister(ZKey(layer: layer)) }
                    reference[i].z = LWWRegister(ZKey(layer: layer))
                    reference.sort(by: ElementRecord.zLess)
                } else {
                    let i = Int(rng.next() % UInt64(reference.count))
                    let w = Int64(rng.next() % 1000)
                    #expect(table.update(reference[i].id) { $0.wallTime = w }, "seed \(seed) step \(step)")
                    reference[i].wallTime = w
                }
                #expect(table.count == reference.count, "seed \(seed) step \(step)")
                // A batch of deferred inserts goes on over several steps before it settles.
                if rng.next() % 3 == 0 { continue }
                table.settle()
                // A removed or unknown id is not found, and updating it does nothing.
                let unknown = OpID(replica: ReplicaID(99), counter: next + 7)
                #expect(table[unknown] == nil && !table.update(unknown) { $0.wallTime = -1 } && table.remove(unknown) == nil)

                #expect(table.ordered == reference, "seed \(seed) step \(step): order differs from the reference")
                #expect(table.orderedIDs == reference.map(\.id), "seed \(seed) step \(step)")
                #expect(table.count == reference.count, "seed \(seed) step \(step)")
                for (position, r) in reference.enumerated() where rng.next() % 4 == 0 {
                    #expect(table[r.id] == r, "seed \(seed) step \(step): lookup of \(r.id)")
                    #expect(table.position(of: r.id) == position, "seed \(seed) step \(step): position of \(r.id)")
                    #expect(table.record(atPosition: position) == r, "seed \(seed) step \(step)")
                }
            }
        }
    }

    @Test("removing k of E records together costs one pass over the z order, not k")
    func removalsTogetherCostOnePass() {
        let e = 20_000
        var table = ElementTable(ordered: (1...e).map { Self.record(OpID(replica: ReplicaID(1), counter: UInt64($0)), layer: Int64($0)) })
        // A reorder of every other element to below the rest, then an erase of a third of them.
        let moving = stride(from: 2, through: e, by: 2).map { OpID(replica: ReplicaID(1), counter: UInt64($0)) }
        for r in table.remove(all: moving) {
            var r = r!
            r.z = LWWRegister(ZKey(layer: -Int64(r.id.counter)))
            table.insert(deferring: true, r)
        }
        table.settle()
        let erasing = stride(from: 3, through: e, by: 3).map { OpID(replica: ReplicaID(1), counter: UInt64($0)) }
        #expect(table.remove(all: erasing).allSatisfy { $0 != nil })
        let expected = (stride(from: e, through: 2, by: -2).map { $0 } + stride(from: 1, through: e, by: 2).map { $0 })
            .filter { $0 % 3 != 0 }.map { OpID(replica: ReplicaID(1), counter: UInt64($0)) }
        #expect(table.orderedIDs == expected)
        #expect(table.removalWork <= 2 * e, "slots scanned: \(table.removalWork)")
    }

    @Test("a table built from records in z order hands the same array back, and appends on top keep it")
    func orderedArrayIsSharedUntilOrderChanges() {
        let records = (1...10).map { Self.record(OpID(replica: ReplicaID(1), counter: UInt64($0)), layer: Int64($0)) }
        var table = ElementTable(ordered: records)
        table.insert(Self.record(OpID(replica: ReplicaID(1), counter: 11), layer: 11))
        #expect(table.ordered == records + [Self.record(OpID(replica: ReplicaID(1), counter: 11), layer: 11)])
        // Removing the top record keeps slots in order; removing one below gives an explicit order.
        _ = table.remove(OpID(replica: ReplicaID(1), counter: 11))
        #expect(table.ordered == records)
        _ = table.remove(OpID(replica: ReplicaID(1), counter: 3))
        #expect(table.ordered == records.filter { $0.id.counter != 3 })
        #expect(table.position(of: OpID(replica: ReplicaID(1), counter: 10)) == 8)
    }

    /// The id table is built on the first lookup, not with the table, and copies share it
    /// until one of them changes: inserts and removals before any lookup, lookups on a copy
    /// that build the shared table, then changes to the original, must leave every copy
    /// answering for its own records.
    @Test("the id table built on first lookup, shared by copies until one changes, answers for each copy's own records")
    func lazyIndexAndCopies() {
        for seed: UInt64 in 1...60 {
            var rng = SplitMix64(seed: seed)
            var next: UInt64 = 1
            var reference: [ElementRecord] = []
            for _ in 0..<Int(rng.next() % 40) {
                reference.append(Self.record(OpID(replica: ReplicaID(1 + rng.next() % 2), counter: next), layer: Int64(next)))
                next += 1
            }
            var table = Self.table(reference, unbuilt: seed % 2 == 1)
            var copies: [(table: ElementTable, records: [ElementRecord])] = []
            for step in 0..<120 {
                let roll = rng.next() % 100
                if roll < 40 || reference.isEmpty {
                    // One record, or (1 in 3) a batch through `insert(count:)`: mostly on top and in
                    // order (a log tail's adds), sometimes one below the top.
                    let batch = rng.next() % 3 == 0 ? 1 + Int(rng.next() % 6) : 1
                    var made: [ElementRecord] = []
                    for _ in 0..<batch {
                        let layer = roll < 25 || rng.next() % 4 != 0 ? Int64(next) : Int64(rng.next() % (next + 1))
                        made.append(Self.record(OpID(replica: ReplicaID(1 + rng.next() % 2), counter: next), layer: layer))
                        next += 1
                    }
                    if batch == 1 && rng.next() % 2 == 0 { table.insert(made[0]) } else { table.insert(count: made.count) { made[$0] } }
                    reference += made
                    reference.sort(by: ElementRecord.zLess)
                } else if roll < 65 {
                    let i = Int(rng.next() % UInt64(reference.count))
                    #expect(table.remove(reference[i].id) == reference[i], "seed \(seed) step \(step)")
                    reference.remove(at: i)
                } else if roll < 75 {
                    let i = Int(rng.next() % UInt64(reference.count))
                    #expect(table.update(reference[i].id) { $0.wallTime = 5 }, "seed \(seed) step \(step)")
                    reference[i].wallTime = 5
                } else if roll < 90 {
                    // A copy, sometimes looked up at once (building the table the copies share).
                    let copy = table
                    if rng.next() % 2 == 0, let r = reference.first { #expect(copy[r.id] == r, "seed \(seed) step \(step)") }
                    copies.append((copy, reference))
                } else if let r = reference.last {
                    #expect(table.contains(r.id) && table[r.id] == r, "seed \(seed) step \(step)")
                }
            }
            copies.append((table, reference))
            for (k, c) in copies.enumerated() {
                #expect(c.table.ordered == c.records, "seed \(seed) copy \(k)")
                for (position, r) in c.records.enumerated() {
                    #expect(c.table[r.id] == r && c.table.position(of: r.id) == position, "seed \(seed) copy \(k): \(r.id)")
                }
                // An id removed from the table or added only to a later copy is not found.
                let live = Set(c.records.map(\.id))
                for r in reference + copies.flatMap(\.records) where !live.contains(r.id) {
                    #expect(!c.table.contains(r.id), "seed \(seed) copy \(k): \(r.id) found")
                }
            }
        }
    }
}

extension ElementTableTests {
    /// What a listing open does with the snapshot's records: count them, list their ids, add a
    /// log tail's strokes on top, look ids up. None of it may build them; reading one builds
    /// them once, for every copy; a change below the top moves them into the table.
    @Test("an unbuilt prefix: counting, listing, adding on top and lookups build nothing; a read builds once, for every copy")
    func unbuiltPrefixIsBuiltOnlyWhenRead() {
        let records = (1...200).map { Self.record(OpID(replica: ReplicaID(1), counter: UInt64($0)), layer: Int64($0)) }
        let builds = BuildCount()
        var table = Self.table(records, unbuilt: true, builds: builds)
        let tail = (201...260).map { Self.record(OpID(replica: ReplicaID(2), counter: UInt64($0)), layer: Int64($0)) }
        table.insert(count: 30) { tail[$0] }
        for r in tail[30...] { table.insert(r) }
        #expect(table.count == 260)
        #expect(table.orderedIDs == (records + tail).map(\.id))
        #expect(table.contains(records[17].id) && table.position(of: records[17].id) == 17)
        #expect(table.contains(tail[5].id) && !table.contains(OpID(replica: ReplicaID(3), counter: 1)))
        // A record on top after the lookups built the id table.
        let above = Self.record(OpID(replica: ReplicaID(2), counter: 261), layer: 261)
        table.insert(above)
        #expect(table[above.id] == above && table.record(atPosition: 260) == above)
        #expect(builds.value == 0, "built \(builds.value) times without a record read")

        // A record of the prefix read: built once, and a copy reads the same build.
        let copy = table
        #expect(table[records[3].id] == records[3])
        #expect(copy.ordered == records + tail + [above])
        #expect(builds.value == 1)
        // A change to a record of the prefix: the copy keeps its own.
        var changed = table
        #expect(changed.update(records[3].id) { $0.wallTime = 99 })
        #expect(changed[records[3].id]?.wallTime == 99 && copy[records[3].id]?.wallTime == 0)
        #expect(changed.orderedIDs == copy.orderedIDs && builds.value == 1)

        // Below the top, on a fresh table: the records are built and keep their slots.
        let again = BuildCount()
        var below = Self.table(records, unbuilt: true, builds: again)
        let under = Self.record(OpID(replica: ReplicaID(4), counter: 1), layer: 0)
        below.insert(under)
        #expect(again.value == 1)
        #expect(below.ordered == [under] + records)
        #expect(below.position(of: records[0].id) == 1 && below[under.id] == under)
    }
}
