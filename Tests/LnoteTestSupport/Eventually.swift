/// Waits until `condition` holds (true), checking every 2 ms, or until `seconds` pass
/// (false): for tests that wait for something another thread or process does. Nothing is
/// timed: a slow machine only waits longer, up to the bound, which guards against a hang.
public func eventually(_ seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
    let end = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while ContinuousClock.now < end {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}
