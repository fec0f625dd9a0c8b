import Foundation
import LnoteModel
import LnoteStore

// The rows an export writes, computed from the notebook. The writer inserts them; the
// verifier reads the database back into the same structs and compares, field by field.

struct DocumentRow: Hashable {
    var id: String
    var title: String
    var createdMs: Int64
    var modifiedMs: Int64
    var deleted: Bool
}

struct PageRow: Hashable {
    var id: String
    var documentID: String
    var position: Int
    var widthPt: Double
    var heightPt: Double
    var createdMs: Int64
    var modifiedMs: Int64
    var deleted: Bool
}

/// `a b c d` as ratios, `tx ty` in points ([EXP-30]).
struct TransformColumns: Hashable {
    var a: Double, b: Double, c: Double, d: Double, txPt: Double, tyPt: Double
    init(_ t: Transform) {
        a = Double(t.a) / Double(Transform.one)
        b = Double(t.b) / Double(Transform.one)
        c = Double(t.c) / Double(Transform.one)
        d = Double(t.d) / Double(Transform.one)
        txPt = Quantization.points(t.tx)
        tyPt = Quantization.points(t.ty)
    }
    init(a: Double, b: Double, c: Double, d: Double, txPt: Double, tyPt: Double) {
        self.a = a; self.b = b; self.c = c; self.d = d; self.txPt = txPt; self.tyPt = tyPt
    }
}

struct StrokeRow: Hashable {
    var pageID: String
    var elementID: String
    var z: Int
    var createdMs: Int64
    var tool: String
    var color: String
    var widthPt: Double
    var transform: TransformColumns
    var pointCount: Int
    var points: [UInt8]
    var radii: [UInt8]
    var erased: String
    /// The `exact` BLOB, nil (NULL) unless a value is not exact in binary32 ([EXP-28]).
    var exact: [UInt8]?
}

struct ImageRow: Hashable {
    var pageID: String
    var elementID: String
    var z: Int
    var createdMs: Int64
    var assetID: String
    var xPt: Double
    var yPt: Double
    var widthPt: Double
    var heightPt: Double
    var rotationDeg: Double
    var transform: TransformColumns
}

/// One page with its rows, and the source strokes (for the point-by-point check).
struct SourcePage {
    var row: PageRow
    var strokes: [StrokeRow] = []
    var images: [ImageRow] = []
    /// The source points of each stroke, by element id.
    var sourcePoints: [String: [StrokePoint]] = [:]
}

struct SourceDocument {
    var row: DocumentRow
    var pages: [SourcePage]
    /// Assets its exported images reference, with their bytes (only those not in `skip`
    /// when collected).
    var assets: [(id: AssetID, bytes: [UInt8])]
    var assetIDs: Set<AssetID>
}

enum ExportSource {
    /// Opens `docID`, computes its rows (nil: a deleted document and `includeDeleted` is
    /// false), reads the bytes of referenced assets not in `skip`, and closes it.
    static func collect(_ nb: Notebook, _ docID: DocumentID, includeDeleted: Bool,
                        skip: Set<AssetID>) async throws -> SourceDocument? {
        let d = try await nb.openDocument(docID)
        do {
            let out = try await collect(d, includeDeleted: includeDeleted, skip: skip)
            try await d.close()
            return out
        } catch {
            try? await d.close()
            throw error
        }
    }

    static func collect(_ d: Document, includeDeleted: Bool, skip: Set<AssetID>) async throws -> SourceDocument? {
        let state = await d.state
        if state.deleted.value && !includeDeleted { return nil }
        let docID = state.id.description
        // [EXP-11] live pages in document order, then deleted ones in document order.
        var ordered = state.pages.filter { !$0.deleted.value }
        if includeDeleted { ordered += state.pages.filter(\.deleted.value) }
        var modified = state.modified
        var pages: [SourcePage] = []
        var assetIDs = Set<AssetID>()
        for (position, record) in ordered.enumerated() {
            let pid = record.id
            // A page with neither snapshot nor log is empty; loading it would create its log.
            let fm = FileManager.default
            let hasFiles = fm.fileExists(atPath: d.paths.content(pid)) || fm.fileExists(atPath: d.paths.log(pid))
            let ps = hasFiles ? try await d.pageState(pid) : PageState(page: pid)
            modified = max(modified, ps.modified)
            var page = SourcePage(row: PageRow(
                id: pid.description, documentID: docID, position: position,
                widthPt: Quantization.points(record.canvas.value.width),
                heightPt: Quantization.points(record.canvas.value.height),
                createdMs: record.created, modifiedMs: ps.modified, deleted: record.deleted.value))
            // [EXP-12] z counts every live element of the page, bottom to top.
            for (z, e) in ps.elements.enumerated() {
                let eid = e.id.description
                switch e.content {
                case .stroke(let s):
                    // [EXP-28] nearest floats always, the exact integers beside them when needed.
                    let blobs = PointBlob.encode(s.points)
                    page.strokes.append(StrokeRow(
                        pageID: page.row.id, elementID: eid, z: z, createdMs: e.wallTime,
                        tool: s.style.tool.description, color: s.style.color.description,
                        widthPt: Quantization.points(s.style.width), transform: TransformColumns(e.transform.value),
                        pointCount: s.points.count, points: blobs.points, radii: blobs.radii,
                        erased: erasedJSON(e.erased), exact: blobs.exact))
                    page.sourcePoints[eid] = s.points
                case .image(let i):
                    assetIDs.insert(i.asset)
                    page.images.append(ImageRow(
                        pageID: page.row.id, elementID: eid, z: z, createdMs: e.wallTime,
                        assetID: i.asset.description,
                        xPt: Quantization.points(i.frame.x), yPt: Quantization.points(i.frame.y),
                        widthPt: Quantization.points(i.frame.width), heightPt: Quantization.points(i.frame.height),
                        rotationDeg: Double(i.rotation) / 100, transform: TransformColumns(e.transform.value)))
                }
            }
            pages.append(page)
        }
        var assets: [(id: AssetID, bytes: [UInt8])] = []
        for a in assetIDs.sorted() where !skip.contains(a) {
            let bytes = try await d.assetBytes(a)
            guard AssetID.of(bytes) == a else {
                throw LnoteError(.corrupt, "asset bytes do not hash to their name", path: d.paths.asset(a))
            }
            assets.append((a, bytes))
        }
        return SourceDocument(row: DocumentRow(id: docID, title: state.title.value, createdMs: state.created,
                                               modifiedMs: modified, deleted: state.deleted.value),
                              pages: pages, assets: assets, assetIDs: assetIDs)
    }

    /// `[[from,to],...]`: the erased point ranges, half-open, sorted and disjoint ([EXP-25]).
    static func erasedJSON(_ ranges: [PointRange]) -> String {
        "[" + ranges.normalizedUnion().map { "[\($0.from),\($0.to)]" }.joined(separator: ",") + "]"
    }
}
