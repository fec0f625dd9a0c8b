import Foundation
import Testing
import LnoteTestSupport

/// Runs the built example program like a user would, and checks what it prints.
@Suite struct ExamplesTests {
    @Test func twoMachinesConvergeAndReportConflicts() async throws {
        let r = try await Subprocess.run(Subprocess.product("two-machines"), [])
        #expect(r.status == 0, "stderr: \(r.errText)")
        let out = r.outText
        #expect(out.contains("identical: yes"))
        #expect(out.contains("conflict reports identical: yes"))
        // The scripted edits make exactly one erase, one move and one title conflict.
        #expect(out.contains("  erase page"))
        #expect(out.contains("  move page"))
        #expect(out.contains("  title:"))
        // Both libraries list the merged document with the same counts.
        let listings = out.components(separatedBy: "library:\n").dropFirst().map { $0.components(separatedBy: "\n").first ?? "" }
        #expect(listings.count == 2 && listings[0] == listings[1], "\(listings)")
        // After first contact, each sync is a single exchange.
        #expect(out.contains("1 round trip(s)"))
    }
}
