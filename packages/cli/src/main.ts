#!/usr/bin/env node
/** The `opkit` command (see cli.ts): `opkit --help` lists the commands. */
import { runCli } from './cli.ts';

process.exitCode = await runCli(process.argv.slice(2));
