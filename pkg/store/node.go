package store

import "github.com/dnsconfigurer/dnsconfigurer/pkg/store/internal/pack"

// Node is one name of a Snapshot: its records, packed (package pack). A
// Node without data is an empty non-terminal: the name exists (NOERROR,
// no answer) but holds no records. A build makes its nodes as drafts
// (pack.Draft), which it packs when it finishes.
type Node = pack.Node

// SRV is the data of one SRV record.
type SRV = pack.SRV
