package sandbox

import "time"

// SetStaleImportAge sets the age from which RemoveStaleImports removes an untagged
// image it made, for tests; the returned func restores it.
func SetStaleImportAge(d time.Duration) (restore func()) {
	old := staleImportAge
	staleImportAge = d
	return func() { staleImportAge = old }
}
