#!/usr/bin/env node
/** The opkit-controlplane bin: runs src/cli/main.ts with Node >= 24, whichever Node started it (see launch.cjs). */
'use strict';
const { join } = require('node:path');
const { launch } = require('./launch.cjs');

launch('opkit-controlplane', join(__dirname, '..', 'src', 'cli', 'main.ts'));
