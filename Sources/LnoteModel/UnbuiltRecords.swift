import Synchronization

/// A version-5 snapshot's element records, not parsed yet ([SNAP-46]): their ids in z order
/// (from the element index's id table, [SNAP-45]), the top one's z key, and how to read them
/// all. What a page open that only lists its elements needs: parsing 1,500 records that
/// nothing reads was most of the CPU of opening a pen page.
///
/// Made only by `PageSnapshot.decode` when listing, from a file whose envelope, other
/// sections, index and id table passed their checks. The records themselves are read and
/// checked when first needed (`build()`), by decoding the whole file again as any open
/// would: so they are exactly the records an eager open gives, and a fault among them is
/// reported with the error and offset an eager open reports. Shared, immutable once built,
/// by copies of the table that holds it (`ElementTable`).
package final class UnbuiltRecords: Sendable, Hashable {
    /// The records' ids, bottom to top.
    package let ids: [ElementID]
    /// The top record's z key and id (where a record added on top must go above).
    package let top: (z: ZKey, id: ElementID)
    /// The records, and the source of their deferred points.
    package typealias Built = (records: [ElementRecord], source: DeferredPoints?)
    private let make: @Sendable () throws -> Built
    private let built = Mutex<Result<Built, LnoteError>?>(nil)

    /// `ids` MUST be the ids of what `make` returns when it returns, in its order, and `top`
    /// its last record's key and id; `make` MUST give the same outcome every time.
    package init(ids: [ElementID], top: (z: ZKey, id: ElementID), make: @escaping @Sendable () throws -> Built) {
        precondition(!ids.isEmpty, "an unbuilt prefix holds at least one record")
        self.ids = ids
        self.top = top
        self.make = make
    }

    package var count: Int { ids.count }

    /// The records and their source, read on the first call and kept (the error too).
    /// - Throws: `corrupt` (with the snapshot's path and the byte offset) when they do not
    ///   decode, or do not match the ids and key the open listed.
    @discardableResult
    package func build() throws -> Built {
        try built.withLock { b in
            if b == nil {
                do {
                    let r = try make()
                    if r.records.count == ids.count, r.records.last?.id == top.id {
                        b = .success(r)
                    } else {
                        // `make` decodes what the open checked: the id table's match with the
                        // records is among its checks ([SNAP-45]), so this is a bug, reported
                        // rather than trapped on.
                        b = .failure(LnoteError(.corrupt, "the element records do not give the \(ids.count) ids listed at the open"))
                    }
                } catch let e as LnoteError {
                    b = .failure(e)
                } catch {
                    b = .failure(LnoteError(.corrupt, "\(error)"))
                }
            }
            return try b!.get()
        }
    }

    /// The records, built here if they were not. Every reader of an unbuilt table builds it
    /// through a throwing call before it reads a record (`PageReplica.buildRecords`, `resolve`,
    /// `resolvedElement`): only there can records that do not decode be reported, so reaching
    /// this with such records is a bug, and it traps.
    package var records: [ElementRecord] {
        guard let r = try? build() else {
            preconditionFailure("the element records of a snapshot that do not decode were read without building them first")
        }
        return r.records
    }

    /// The records, taken out of this object when the caller holds its only reference
    /// (then not kept here: the caller may grow the array in place), else a copy. Built first.
    package static func take(_ u: inout UnbuiltRecords) -> [ElementRecord] {
        guard isKnownUniquelyReferenced(&u) else { return u.records }
        let records = u.records
        u.built.withLock { $0 = nil }
        return records
    }

    /// By identity: two are equal when they are one object.
    package static func == (l: UnbuiltRecords, r: UnbuiltRecords) -> Bool { l === r }
    package func hash(into h: inout Hasher) { h.combine(ObjectIdentifier(self)) }
}
