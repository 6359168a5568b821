module deepinfer

go 1.26

require (
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)
