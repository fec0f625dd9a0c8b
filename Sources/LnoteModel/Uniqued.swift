extension Array where Element: Hashable {
    /// The elements in their order, each once (the first of equal ones is kept).
    ///
    /// Short arrays, which are what edits name (one element, a selection's few), are checked
    /// pairwise: no set is allocated and nothing is hashed. Longer ones go through a `Set`.
    public func uniqued() -> [Element] {
        if count < 2 { return self }
        if count <= 16 {
            var out: [Element] = []
            out.reserveCapacity(count)
            for e in self where !out.contains(e) { out.append(e) }
            return out
        }
        var seen = Set<Element>(minimumCapacity: count)
        return filter { seen.insert($0).inserted }
    }
}
