import LnoteModel

/// Makes a forked replica's own operations again under a new replica id ([SYNC-54]).
///
/// A replica that reused its ids (restored in place, copied with its replica file) gives up
/// its versions of the forked operations: another side holds other operations under those
/// ids, and ids must name one operation everywhere. What its user did is not lost: each
/// removed operation is made again, as a new local operation of the new replica id, on the
/// state that remains (which now holds the other side's versions). An element its removed
/// operations added gets a new id, and their later edits of it are made on the new one.
///
/// Pure, like the merge: the caller removes the operations from its logs, rebuilds its
/// replicas without them, receives the other side's versions, then calls these and appends
/// what they return.
public enum Reauthor {
    /// What re-authoring a log did.
    public struct Outcome: Sendable, Equatable {
        /// The new operations, in the order made (to append to the log).
        public var ops: [Op] = []
        /// Old element id → new element id, for the elements added again.
        public var elements: [ElementID: ElementID] = [:]
        /// Removed operations that had nothing left to act on (every element they named
        /// is erased or was never here), with why.
        public var skipped: [(op: OpID, reason: String)] = []

        public static func == (l: Outcome, r: Outcome) -> Bool {
            l.ops == r.ops && l.elements == r.elements
                && l.skipped.map(\.op) == r.skipped.map(\.op) && l.skipped.map(\.reason) == r.skipped.map(\.reason)
        }
    }

    /// Re-authors a page log's removed operations (in log order) on `replica`.
    public static func page(_ removed: [Op], on replica: inout PageReplica, as me: ReplicaID,
                            wallTime: Int64) -> Outcome {
        var out = Outcome()
        func mapped(_ id: ElementID) -> ElementID { out.elements[id] ?? id }
        func live(_ id: ElementID) -> ElementID? {
            let m = mapped(id)
            return replica.isLive(m) ? m : nil
        }
        func make(_ body: Op.Body, for old: Op) {
            do {
                out.ops.append(try replica.make(body, by: me, wallTime: wallTime))
            } catch {
                out.skipped.append((old.id, "\(error)"))
            }
        }
        for op in removed {
            switch op.body {
            case .add(let content, let z):
                let next = OpID(replica: me, counter: replica.clock[me] + 1)
                let key = fit(remapped(z, out.elements), lamport: (try? replica.nextLamport()) ?? 0, top: replica.topKey)
                make(.add(content, z: key), for: op)
                if out.ops.last?.id == next { out.elements[op.id] = next }
            case .erase(let ids):
                let now = ids.compactMap(live)
                if now.isEmpty { out.skipped.append((op.id, "every element it erases is gone")) } else { make(.erase(now), for: op) }
            case .eraseRange(let id, let ranges):
                if let now = live(id) { make(.eraseRange(now, ranges), for: op) } else {
                    out.skipped.append((op.id, "the stroke it erases from is gone"))
                }
            case .restore(let ids):
                // An element this log erased and restores again: restored where it is still erased.
                let now = ids.map(mapped).filter { replica.isRestorable($0) }
                if now.isEmpty { out.skipped.append((op.id, "every element it restores is live or gone")) } else { make(.restore(now), for: op) }
            case .restoreRange(let id, let ranges):
                if let now = live(id) { make(.restoreRange(now, ranges), for: op) } else {
                    out.skipped.append((op.id, "the stroke it restores points of is gone"))
                }
            case .move(let ts):
                let now = ts.compactMap { t in live(t.element).map { ElementTransform($0, t.transform) } }
                if now.isEmpty { out.skipped.append((op.id, "every element it moves is gone")) } else { make(.move(now), for: op) }
            case .reorder(let zs):
                let lamport = (try? replica.nextLamport()) ?? 0
                let now = zs.compactMap { z in
                    live(z.element).map { ElementZ($0, fit(remapped(z.z, out.elements), lamport: lamport,
                                                          top: z.z.layer < 0 ? replica.bottomKey : replica.topKey)) }
                }
                if now.isEmpty { out.skipped.append((op.id, "every element it reorders is gone")) } else { make(.reorder(now), for: op) }
            default:
                out.skipped.append((op.id, "\(op.body.name) is not a page operation"))
            }
        }
        return out
    }

    /// Re-authors a document log's removed operations (in log order) on `document`.
    /// `pageClock` gives a page's current clock, for a delete made again.
    public static func document(_ removed: [Op], on document: inout DocumentReplica, as me: ReplicaID,
                                wallTime: Int64, pageClock: (PageID) -> VectorClock) -> Outcome {
        var out = Outcome()
        func make(_ body: Op.Body, for old: Op) {
            do {
                out.ops.append(try document.make(body, by: me, wallTime: wallTime))
            } catch {
                out.skipped.append((old.id, "\(error)"))
            }
        }
        for op in removed {
            let lamport = (try? document.nextLamport()) ?? 0
            switch op.body {
            case .createDocument(let title):
                // The document exists (the other side created it): the title is what remains.
                if document.state.title.value != title { make(.setTitle(title), for: op) } else {
                    out.skipped.append((op.id, "the document exists with that title"))
                }
            case .setTitle(let t):
                make(.setTitle(t), for: op)
            case .addPage(let p, let position, let canvas):
                if document.page(p) != nil {
                    out.skipped.append((op.id, "page \(p) exists"))
                } else {
                    make(.addPage(p, position: fit(position, lamport: lamport, top: document.endPosition), canvas: canvas), for: op)
                }
            case .deletePage(let p, _):
                make(.deletePage(p, seen: pageClock(p)), for: op)
            case .restorePage(let p):
                make(.restorePage(p), for: op)
            case .movePage(let p, let position):
                make(.movePage(p, position: fit(position, lamport: lamport, top: document.endPosition)), for: op)
            case .setCanvas(let p, let c):
                make(.setCanvas(p, c), for: op)
            case .deleteDocument, .restoreDocument:
                make(op.body, for: op)
            default:
                out.skipped.append((op.id, "\(op.body.name) is not a document operation"))
            }
        }
        return out
    }

    /// `z` with the tags of elements added again replaced by their new ids.
    static func remapped(_ z: ZKey, _ map: [ElementID: ElementID]) -> ZKey {
        var k = z
        for i in k.path.indices { k.path[i].tag = map[k.path[i].tag] ?? k.path[i].tag }
        return k
    }

    /// `z` if an operation with Lamport timestamp `lamport` may carry it ([MERGE-12]), else
    /// `fallback` (on top, or at the bottom for a key below layer 0).
    static func fit(_ z: ZKey, lamport: UInt64, top fallback: ZKey) -> ZKey {
        let bound = Int64(clamping: lamport)
        return z.isValid && z.layer <= bound && z.layer >= -bound ? z : fallback
    }
}
