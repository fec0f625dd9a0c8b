extension Array {
    /// The first index whose element satisfies `belongsAfter`, for a predicate false then true
    /// along the array: a binary search.
    package func partitioningIndex(where belongsAfter: (Element) -> Bool) -> Int {
        var lo = 0, hi = count
        while lo < hi {
            let mid = (lo + hi) / 2
            if belongsAfter(self[mid]) { hi = mid } else { lo = mid + 1 }
        }
        return lo
    }
}
