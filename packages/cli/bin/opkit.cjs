#!/usr/bin/env node
/** The opkit bin: runs src/main.ts with Node >= 24, whichever Node started it (see @opkit/controlplane/launch). */
'use strict';
const { join } = require('node:path');
const { launch } = require('@opkit/controlplane/launch');

launch('opkit', join(__dirname, '..', 'src', 'main.ts'));
