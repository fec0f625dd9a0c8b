import Foundation
import LnoteModel
import LnoteStore

extension Bench {
    /// 8. Library listing of 1,000 documents: `Notebook.list()` (manifest.json only)
    /// against reading and parsing every document.json.
    func caseListing() async throws {
        let documents = options.size(1000, quick: 100)
        let pagesPerDocument = options.size(10, quick: 3)
        let built = try await Fixtures.notebookFolder(ws, name: "case8") { notebook in
            for i in 0..<documents {
                let d = try await notebook.createDocument(title: "Notes \(i + 1)")
                for _ in 1..<pagesPerDocument { _ = try await d.addPage() }
                try await d.close()
            }
            return ()
        }
        var storeOptions = StoreOptions()
        storeOptions.autosave = false
        let notebook = try await Notebook.open(at: built.path, options: storeOptions)
        var listed = 0
        let list = Variant(name: "list", body: { listed = try await notebook.list().count })
        var parsed = 0
        var documentBytes = 0
        let folder = notebook.path
        let readAll = Variant(name: "read every document.json", body: {
            parsed = 0
            documentBytes = 0
            for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name.hasSuffix(PackagePaths.suffix) {
                guard let id = PackagePaths.documentID(fromName: name) else { continue }
                let bytes = try Files.read(PackagePaths(folder: folder, id: id).document)
                documentBytes += bytes.count
                if try JSONSerialization.jsonObject(with: Data(bytes)) is [String: Any] { parsed += 1 }
            }
        })
        let t = try await measure([list, readAll], runs: options.runs)
        var manifestBytes = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name.hasSuffix(PackagePaths.suffix) {
            if let id = PackagePaths.documentID(fromName: name) { manifestBytes += try Files.size(PackagePaths(folder: folder, id: id).manifest) }
        }
        try await notebook.close()
        guard listed == documents, parsed == documents else {
            throw LnoteError(.invalidState, "case 8 listed \(listed) and parsed \(parsed) documents; expected \(documents)")
        }
        results.rows.append(Row(8, "list \(formatCount(documents)) documents (\(pagesPerDocument) pages each)", measured: t[0].median,
                                unit: .seconds, baselineName: "read + parse every document.json", baseline: t[1].median,
                                target: .report,
                                note: "`Notebook.list()` reads and decodes each manifest.json (\(formatBytes(Double(manifestBytes))) in all) "
                                    + "into DocumentSummary; the baseline reads each document.json (\(formatBytes(Double(documentBytes)))) "
                                    + "and parses it with JSONSerialization; warm page cache",
                                measuredRuns: t[0].runs, baselineRuns: t[1].runs))
    }
}
