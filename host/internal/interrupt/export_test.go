package interrupt

// AppendU32 lets the external tests hand-assemble modules with the package's own LEB128 encoder; wazero
// compiling those modules checks the encoder independently.
var AppendU32 = appendU32
