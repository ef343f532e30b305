// Package nodesettings is the contract of GET /node-settings, served by the
// node agents (`dnsconfigurer shim`, `dnsconfigurer nri`) on their metrics
// listener and read by `dnsconfigurer explain`: the settings the agent's
// policy engine runs with and the node resolver config it currently uses.
//
// It holds the JSON type, the conversions from the agent's config and host
// snapshot, and back to the engine's input, so the server and the reader
// share one definition. It imports no Kubernetes client and no logger.
package nodesettings
