/**
 * A reader of `text/event-stream` (the HTML standard's event stream format):
 * lines to events, as much as GET /events needs. Fed text in any chunks.
 */

export interface ServerSentEvent {
  id: string | undefined;
  event: string;
  data: string;
}

export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";
  private id: string | undefined;
  /** The last id seen, kept across events: what `Last-Event-ID` resumes from. */
  lastEventId: string | undefined;

  /** The events completed by `chunk`. */
  push(chunk: string): ServerSentEvent[] {
    this.buffer += chunk;
    const done: ServerSentEvent[] = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      if (end < 0) break;
      // "\r" at the end of a chunk may be the first half of "\r\n": wait for more.
      if (this.buffer[end] === "\r" && end === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith("\r\n", end) ? 2 : 1));
      const event = this.line(line);
      if (event !== undefined) done.push(event);
    }
    return done;
  }

  private line(line: string): ServerSentEvent | undefined {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined; // a comment: the keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
    return undefined;
  }

  private dispatch(): ServerSentEvent | undefined {
    const id = this.id;
    if (id !== undefined) this.lastEventId = id;
    const event = { id: this.lastEventId, event: this.event || "message",
      data: this.data.join("\n") };
    const any = this.data.length > 0;
    this.data = [];
    this.event = "";
    this.id = undefined;
    return any ? event : undefined;
  }
}
