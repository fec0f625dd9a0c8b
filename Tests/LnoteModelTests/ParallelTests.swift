import Synchronization
import Testing
import LnoteModel

@Suite("Parallel.map and Parallel.beside")
struct ParallelTests {
    /// `map` gives exactly the serial map, for any count, parallel or not.
    @Test func mapEqualsSerialMap() {
        for count in [0, 1, 2, 3, 7, 8, 9, 100, 1001] {
            let serial = (0..<count).map { $0 &* 2_654_435_761 }
            #expect(Parallel.map(count) { $0 &* 2_654_435_761 } == serial, "count \(count)")
            #expect(Parallel.map(count, parallel: false) { $0 &* 2_654_435_761 } == serial, "count \(count)")
        }
    }

    /// `beside` runs its other half exactly once, whichever thread takes it (the helper
    /// thread, or the caller when `main` is done first), and returns both results; an error
    /// from `main` comes out.
    @Test func besideRunsTheOtherHalfOnce() throws {
        let runs = Atomic<Int>(0)
        for i in 0..<200 {
            // Short and long halves on either side, so that both threads take `other` at times.
            let (m, o) = Parallel.beside({ () -> Int in
                runs.add(1, ordering: .relaxed)
                return (0..<(i % 3 == 0 ? 20_000 : 10)).reduce(i) { $0 &+ $1 }
            }, { (0..<(i % 2 == 0 ? 20_000 : 10)).reduce(-i) { $0 &+ $1 } })
            #expect(m == (0..<(i % 2 == 0 ? 20_000 : 10)).reduce(-i) { $0 &+ $1 }, "run \(i)")
            #expect(o == (0..<(i % 3 == 0 ? 20_000 : 10)).reduce(i) { $0 &+ $1 }, "run \(i)")
        }
        #expect(runs.load(ordering: .relaxed) == 200)
        struct Failed: Error {}
        #expect(throws: Failed.self) {
            _ = try Parallel.beside({ 1 }, { () throws -> Int in throw Failed() })
        }
    }
}
