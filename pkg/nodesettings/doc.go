// Package nodesettings is the contract of GET /node-settings: a node agent's
// policy engine settings and the node resolver config it uses.
//
// The node agents (`dnsconfigurer shim`, `dnsconfigurer nri`) serve it on
// their metrics listener. `dnsconfigurer explain` reads it.
//
// It holds the JSON type, the conversions from the agent's config and host
// snapshot, and back to the engine's input, so the server and the reader
// share one definition. It imports no Kubernetes client and no logger.
package nodesettings
