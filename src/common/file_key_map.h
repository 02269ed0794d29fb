#pragma once
// Containers keyed by values read from a file (correlation and launch ids, thread ids, ranks,
// stream ids, ...). They are ordered: libstdc++'s std::hash of an integer is the integer itself,
// so a hostile file can choose keys that all fall in one bucket of an unordered container and
// make every lookup linear (hash flooding); log n of an ordered one cannot be pushed further.
// Where a hot path needs a hash table, give it a seeded hash instead. tests/layering/
// check_file_keys.py (run by ctest `layering`) rejects identity-hashed integer keys in src/,
// analyzers/ and reports/.
#include <map>
#include <set>

namespace overlapprof {

template <typename K, typename V>
using FileKeyMap = std::map<K, V>;

template <typename K>
using FileKeySet = std::set<K>;

}  // namespace overlapprof
