package sandbox

import (
	"github.com/docker/docker/client"
)

// DockerAPI is the part of the Docker Engine API client the Docker sandbox,
// Reap and BuildImage use: the composition of the per-concern interfaces
// below, each declared beside the code that consumes it, so a function
// that needs one concern takes only that one and a test fakes only what it
// calls. *client.Client (github.com/docker/docker/client) satisfies it; it
// is owned here, by its consumer, so tests can wrap or fake single calls.
// Create the real client with NewDockerClient. Every call the sandbox
// makes goes through bounded (engine_guard.go), whatever interface it is
// made through.
type DockerAPI interface {
	EngineSystem     // docker.go: ping, info, events
	EngineContainers // docker_create.go: containers and their lives
	EngineExec       // docker_exec.go: execs in a running container
	EngineArchive    // docker_workspace.go: archives in and out of a container
	EngineImages     // image.go: images
	EngineNetworks   // docker_egress.go: networks
	EngineVolumes    // docker_deps.go: volumes
}

var _ DockerAPI = (*client.Client)(nil)

// NewDockerClient returns the Engine API client configured from the
// environment (DOCKER_HOST, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY,
// DOCKER_API_VERSION) with the API version negotiated down to what the Engine
// speaks (this project's CI runs Debian's Engine 20.10, API 1.41). A
// connection it hijacks (attach, exec start) can be closed before the Engine
// answers, so the sandbox's calls end with their context (guardHijacks). It
// does not contact the Engine; call Ping to find out whether one answers.
// The caller closes the client.
func NewDockerClient() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation(), guardHijacks)
}
