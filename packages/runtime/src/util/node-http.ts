/**
 * node:http for the runtime's own code, through process.getBuiltinModule rather than an ESM import (`import
 * ... from 'node:http'`, types excepted). Node builds an ES module's view of a builtin by reading every
 * export once, and node:http's lazy WebSocket, CloseEvent and MessageEvent getters then load undici
 * (Node's fetch and WebSocket): ~15-30 ms of every start-up for code the operator never runs (it makes
 * no fetch and execs through `ws`). It is the same module object either way.
 */
import type * as http from 'node:http';

export const nodeHttp: typeof http = process.getBuiltinModule('node:http');
