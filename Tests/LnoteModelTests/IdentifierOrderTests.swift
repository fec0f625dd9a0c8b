import Foundation
import Testing
import LnoteModel

@Suite("Document and page ids sort as their strings do")
struct IdentifierOrderTests {
    /// Random UUIDs, and ones that differ in a single byte or nibble (where a word-wise
    /// comparison that got the byte order wrong would show).
    static func uuids(_ g: inout SplitMix64) -> (UUID, UUID) {
        var a = (0..<16).map { _ in UInt8(truncatingIfNeeded: g.next()) }
        var b = a
        switch g.next() % 3 {
        case 0: b = (0..<16).map { _ in UInt8(truncatingIfNeeded: g.next()) }
        case 1: b[Int(g.next() % 16)] = UInt8(truncatingIfNeeded: g.next())
        default:
            let i = Int(g.next() % 16)
            a[i] = [0x09, 0x0A, 0x90, 0xA0, 0x00, 0xFF][Int(g.next() % 6)]
            b[i] = [0x09, 0x0A, 0x90, 0xA0, 0x00, 0xFF][Int(g.next() % 6)]
        }
        return (UUID(bytes: a)!, UUID(bytes: b)!)
    }

    @Test("DocumentID and PageID < agree with their descriptions' order", arguments: testSeeds(0x1D_0DE5, count: 10))
    func orderMatchesStrings(seed: UInt64) {
        var g = SplitMix64(seed: seed)
        for _ in 0..<2_000 {
            let (a, b) = Self.uuids(&g)
            let expected = a.uuidString < b.uuidString
            #expect((DocumentID(a) < DocumentID(b)) == expected, "seed \(seed): \(a) \(b)")
            #expect((PageID(a) < PageID(b)) == expected, "seed \(seed): \(a) \(b)")
            #expect(!(DocumentID(a) < DocumentID(a)), "seed \(seed): \(a)")
        }
    }
}
