import Foundation
import Testing
import LnoteModel
@testable import LnoteServer

/// [SYNC-90] The one escaping function of the view, on every character HTML gives a meaning
/// and on the controls HTML forbids, over seeded random text.
@Suite struct EscapeTests {
    @Test func sync90EscapesMarkupAndControls() {
        #expect(WebViewHTML.escape("<a href=\"x\" title='y'>&amp;</a>")
                == "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;")
        #expect(WebViewHTML.escape("a\u{1B}[31mb\u{0}c\u{7F}d\u{85}e\tf\ng") == "a\u{FFFD}[31mb\u{FFFD}c\u{FFFD}d\u{FFFD}e\tf\ng")
        #expect(WebViewHTML.escape("née 📓 \u{202E}") == "née 📓 \u{202E}")
        // Random text from a small alphabet rich in specials: no raw `<`, `>`, `"`, `'` and
        // every `&` starts one of the five references; decoding gives the text back.
        let seed: UInt64 = 0x5EED_E5C
        var rng = SplitMix64(seed: seed)
        let alphabet = Array("<>&\"'ab \u{1}\u{9F}é;#")
        for _ in 0..<500 {
            let text = String((0..<Int(rng.next() % 40)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
            let e = WebViewHTML.escape(text)
            #expect(!e.contains { "<>\"'".contains($0) }, "seed \(seed): \(text) → \(e)")
            var decoded = e
            for (ref, c) in [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&#39;", "'"), ("&amp;", "&")] {
                decoded = decoded.replacingOccurrences(of: ref, with: c)
            }
            let expected = String(text.unicodeScalars.map { $0.value < 0x20 && $0 != "\t" && $0 != "\n" || (0x7F...0x9F).contains($0.value)
                ? "\u{FFFD}" : Character($0) })
            #expect(decoded == expected, "seed \(seed): \(text) → \(e)")
        }
    }
}
