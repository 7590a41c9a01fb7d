package sandbox

import "github.com/docker/docker/api/types/system"

// FactsEngine is the Engine a fact is about (its Info), for tests.
type FactsEngine = system.Info

// StoreFact, LoadFact and ForgetFact reach EngineFacts' store, load and
// forget with a kind of the tests' own.
func StoreFact(f EngineFacts, e FactsEngine, key string, v any) error {
	return f.store("test", e, key, v)
}

func LoadFact(f EngineFacts, e FactsEngine, key string, v any) bool { return f.load("test", e, key, v) }

func ForgetFact(f EngineFacts, e FactsEngine, key string) { f.forget("test", e, key) }
