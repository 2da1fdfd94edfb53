// SPDX-License-Identifier: LGPL-2.1-or-later
// The example of the README (type-checked by the build): a session, a command streamed, a file.
import { Client } from "@sandboxd/client";

const client = new Client(); // $SANDBOXD_URL (else /run/sandboxd/http.sock), $SANDBOXD_KEY
const session = await client.createSession({ user: "alice", workspace: "demo" });
for await (const ev of await session.exec({ command: "echo hello; ls /" }))
    if (ev.type === "stdout") process.stdout.write(ev.bytes!);
await session.files.write("notes.txt", "hi\n");
const r = await session.run({ argv: ["cat", "notes.txt"] });
console.log(r.status, r.exitCode, r.stdoutText);
await session.close();
client.close();
