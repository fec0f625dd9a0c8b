import Foundation
import Testing
import LnoteModel

@Suite("Canonical JSON")
struct CanonicalJSONTests {
    /// [JSON-2] Keys sorted by UTF-8 bytes, [JSON-1] no whitespace in compact form.
    @Test func compactForm() {
        let v: CanonicalJSON = ["b": 1, "a": [true, false, nil], "é": "x", "Z": -5, "aa": .uint(UInt64.max), "": [:]]
        #expect(v.text() == #"{"":{},"Z":-5,"a":[true,false,null],"aa":18446744073709551615,"b":1,"é":"x"}"#)
        #expect(CanonicalJSON.int(.min).text() == "-9223372036854775808")
        #expect(CanonicalJSON.array([]).text() == "[]")
    }

    /// [JSON-3] The fixed escaping rule.
    @Test func escaping() {
        let s = "q\"b\\s/\u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}é😀"
        #expect(CanonicalJSON.string(s).text() == "\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}é😀\"")
    }

    /// [JSON-5] [JSON-2] No Unicode normalization: a precomposed and a decomposed "é" print
    /// their own UTF-8 bytes, as strings and as keys, and keys sort by those bytes (the
    /// decomposed `e` + U+0301 before "f", the precomposed U+00E9 after it).
    @Test func noNormalization() {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        #expect(CanonicalJSON.string(composed).bytes() == [0x22, 0xC3, 0xA9, 0x22])
        #expect(CanonicalJSON.string(decomposed).bytes() == [0x22, 0x65, 0xCC, 0x81, 0x22])
        #expect(CanonicalJSON.string("\u{212B}").bytes() == [0x22, 0xE2, 0x84, 0xAB, 0x22], "Å (Angstrom sign) is not mapped to U+00C5")
        let a: CanonicalJSON = [decomposed: 1, "f": 2]
        #expect(a.bytes() == Array("{\"e\u{301}\":1,\"f\":2}".utf8))
        #expect(Array(a.bytes()[2...4]) == [0x65, 0xCC, 0x81])
        let b: CanonicalJSON = [composed: 1, "f": 2]
        #expect(b.bytes() == [0x7B] + Array("\"f\":2,\"".utf8) + [0xC3, 0xA9] + Array("\":1}".utf8))
    }

    /// [JSON-4] The pretty form.
    @Test func prettyForm() {
        let v: CanonicalJSON = ["name": "x", "points": [[1, 2], [3, 4]], "empty": [], "flat": ["k": 1, "j": 2],
                                "deep": ["inner": ["x": [1]]]]
        let expected = """
        {
          "deep": {
            "inner": {
              "x": [1]
            }
          },
          "empty": [],
          "flat": {"j": 2, "k": 1},
          "name": "x",
          "points": [
            [1, 2],
            [3, 4]
          ]
        }

        """
        #expect(v.text(.pretty) == expected)
    }

    /// Random values print text that Foundation parses back to the same structure, and
    /// equal values print identical bytes.
    @Test func randomValuesAreValidJSON() throws {
        for seed in testSeeds(0x150_0001, count: 300) {
            var g = SplitMix64(seed: seed)
            let v = Self.randomValue(&g, depth: 0)
            for style in [CanonicalJSON.Style.compact, .pretty] {
                let text = v.bytes(style)
                let parsed = try JSONSerialization.jsonObject(with: Data(text), options: [.fragmentsAllowed])
                #expect(Self.matches(v, parsed), "seed \(seed) \(style): \(String(decoding: text, as: UTF8.self))")
            }
        }
    }

    static func randomValue(_ g: inout SplitMix64, depth: Int) -> CanonicalJSON {
        switch g.below(depth > 3 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(g.chance(0.5))
        case 2: return .int(Int64(bitPattern: g.next()) >> Int64(g.below(64)))
        case 3: return .uint(g.next() >> 12) // within Double's exact range for the comparison
        case 4:
            let alphabet = Array("aZ09 \"\\/\n\t\u{1}é€😀".unicodeScalars)
            var s = ""
            for _ in 0..<g.below(8) { s.unicodeScalars.append(alphabet[Int(g.below(UInt64(alphabet.count)))]) }
            return .string(s)
        case 5: return .array((0..<g.below(4)).map { _ in randomValue(&g, depth: depth + 1) })
        default:
            var d: [String: CanonicalJSON] = [:]
            for _ in 0..<g.below(4) { d["k\(g.below(10))"] = randomValue(&g, depth: depth + 1) }
            return .object(d)
        }
    }

    static func matches(_ v: CanonicalJSON, _ any: Any) -> Bool {
        switch v {
        case .null: return any is NSNull
        case .bool(let b): return (any as? Bool) == b
        case .int(let i): return (any as? NSNumber).map { $0.int64Value == i } ?? false
        case .uint(let u): return (any as? NSNumber).map { $0.uint64Value == u } ?? false
        case .string(let s): return (any as? String) == s
        case .array(let a):
            guard let x = any as? [Any], x.count == a.count else { return false }
            return zip(a, x).allSatisfy { matches($0, $1) }
        case .object(let o):
            guard let x = any as? [String: Any], x.count == o.count else { return false }
            return o.allSatisfy { k, v in x[k].map { matches(v, $0) } ?? false }
        }
    }

    /// [JSON-10] The page JSON: elements bottom to top, parseable, points quantized.
    @Test func pageJSON() throws {
        let state = TinyPage.state
        let text = state.canonicalJSON()
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let elements = try #require(parsed["elements"] as? [[String: Any]])
        #expect(elements.map { $0["kind"] as? String } == ["stroke", "image"])
        #expect(elements[0]["id"] as? String == "00000000000000b2.2")
        #expect(elements[0]["z"] as? String == "1/:00000000000000a1.1.80")
        let pts = try #require(elements[0]["points"] as? [[Int]])
        #expect(pts.first == [1100, 2100, 500, 10, 0])
        let tombstones = try #require(parsed["tombstones"] as? [[String: Any]])
        #expect(tombstones.map { $0["concurrent"] as? [String] } == [["00000000000000b2.3@4"]])
        #expect(state.canonicalJSON(style: .compact, includePoints: false).contains("\"pointCount\":2"))
        #expect(!state.canonicalJSON(includePoints: false).contains("\"points\""))
    }
}
