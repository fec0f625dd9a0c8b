import LnoteModel

/// JSON lines (Protocol/import-jsonl.md) split into pages by their `"page"` key ([IMP-10]):
/// a positive integer is a page's 1-based position in the document, a string a page's id;
/// lines without the key go to the page the command names.
public enum JSONLinesReader {
    /// The largest page position a line may name (positions past the document's last page
    /// create pages, so this bounds what one file can add).
    public static let maxPosition = 10_000

    /// Reads a file (`-`: standard input) and groups its strokes by page, pages in the
    /// order their first line comes.
    public static func read(contentsOf path: String, style: InkStyle = InkStyle(), budget: ImportBudget = ImportBudget()) throws -> ImportedInk {
        let lines = try StrokeImport.pagedStrokes(contentsOf: path, style: style, budget: budget)
        var ink = ImportedInk()
        var slot: [ImportedPage.Target: Int] = [:]
        for l in lines {
            let target = try target(l.page, kind: l.pageKind, line: l.lineNumber, offset: l.offset, path: path)
            if slot[target] == nil {
                slot[target] = ink.pages.count
                ink.pages.append(ImportedPage(target: target, offset: l.offset, line: l.lineNumber))
            }
            ink.pages[slot[target]!].strokes.append(l.stroke)
        }
        return ink
    }

    /// [IMP-10] What a `"page"` value names.
    static func target(_ page: String?, kind: StrokeImport.PageKind?, line: Int, offset: Int, path: String) throws -> ImportedPage.Target {
        guard let page else { return .given }
        let bytes = Array(page.utf8)
        // A position is a JSON number; a string is a page id, never a position (`"3"` is refused).
        if kind != .string, let f = bytes.first, (0x31...0x39).contains(f), bytes.allSatisfy({ (0x30...0x39).contains($0) }) {
            guard bytes.count <= 5, let n = Int(page), n <= maxPosition else {
                throw LnoteError(.invalidArgument, "line \(line): \"page\" \(page) is past the largest position, \(maxPosition)",
                                 path: path, offset: offset, index: line)
            }
            return .position(n)
        }
        if kind != .number, bytes.count == 36, let id = PageID(page) { return .id(id) }
        throw LnoteError(.invalidArgument,
                         "line \(line): \"page\" must be a position (1, 2, ...) or a page id, got \"\(page.prefix(40))\"",
                         path: path, offset: offset, index: line)
    }
}
