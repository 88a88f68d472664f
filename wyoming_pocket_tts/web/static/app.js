// The voices page. Plain JavaScript, no build step, nothing fetched from elsewhere: every
// URL is relative, so the page works at "/" and under Home Assistant's ingress prefix.
"use strict";

const settings = JSON.parse(document.getElementById("page-settings").textContent);
const strings = settings.strings;
let state = null;
let take = null; // {blob, name, seconds}: the recording or file about to be saved

// -- text -----------------------------------------------------------------------------

function t(key, values = {}) {
  const text = strings[key];
  if (text === undefined) return key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}

function applyStrings(root) {
  for (const element of root.querySelectorAll("[data-i18n]")) element.textContent = t(element.dataset.i18n);
  for (const element of root.querySelectorAll("[data-i18n-label]")) {
    element.setAttribute("aria-label", t(element.dataset.i18nLabel));
  }
}

function $(id) {
  return document.getElementById(id);
}

function say(text) {
  $("alert").hidden = true;
  $("status").textContent = text;
}

function problemText(problem) {
  const key = "error_" + problem.code;
  return key in strings ? t(key, problem.values || {}) : problem.message;
}

function complain(problem) {
  $("status").textContent = "";
  const alert = $("alert");
  alert.textContent = typeof problem === "string" ? problem : problemText(problem);
  alert.hidden = false;
}

// -- the server -------------------------------------------------------------------------

class ApiProblem extends Error {
  constructor(status, body) {
    super(body.message || String(status));
    this.status = status;
    this.code = body.error || "http";
    this.values = body.values || {};
    this.body = body;
  }
}

async function api(method, path, body) {
  const options = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") options.headers[settings.csrfHeader] = settings.csrf;
  if (body instanceof FormData) {
    options.body = body;
  } else if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (error) {
    throw new ApiProblem(0, { error: "network", message: String(error), values: { error: String(error) } });
  }
  const data = await response.json().catch(() => ({ error: "http", message: response.statusText }));
  if (!response.ok) throw new ApiProblem(response.status, data);
  return data;
}

async function refresh() {
  try {
    show((await api("GET", "api/state")));
  } catch (problem) {
    complain(problem);
  }
}

// -- the list of voices -----------------------------------------------------------------

function voicePath(voice) {
  return "api/voices/" + encodeURIComponent(voice.name);
}

function number(value) {
  return Number.isInteger(value) ? value.toFixed(1) : String(Math.round(value * 100) / 100);
}

function show(newState) {
  state = newState;
  $("voices-loading").hidden = true;
  renderVoices();
  const fixed = $("default-fixed");
  fixed.hidden = !state.fixedDefault;
  fixed.textContent = state.fixedDefault ? t("default_fixed", { name: state.fixedDefault }) : "";
  const select = $("new-model");
  if (select.options.length !== state.models.length) {
    select.replaceChildren(...state.models.map((model) => new Option(model.label + " (" + model.languages.join(", ") + ")", model.index)));
  }
  $("model-field").hidden = state.models.length < 2;
  $("new-name").maxLength = state.limits.maxNameLength;
  $("new-description").maxLength = state.limits.maxDescriptionLength;
  $("preview-text").maxLength = state.limits.maxPreviewChars;
  $("name-hint").textContent = t("name_hint", { max: state.limits.maxNameLength });
  $("record-hint").textContent = t("record_hint", { min: state.limits.minSeconds, max: state.limits.maxSeconds });
  // Encodings and model loads end by themselves: look again until none is in progress
  // (and for a while after a change, whose encoding starts in the background).
  const busy = state.voices.some((voice) => voice.encoding === "encoding" || voice.encoding === "model_loading");
  if ((busy || Date.now() < watchUntil) && !refreshTimer) {
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      refresh();
    }, 2000);
  }
}

let watchUntil = 0;
let refreshTimer = null;

function watchAfterChange() {
  watchUntil = Date.now() + 10000;
}

// The list's items by voice name, each with the data it shows: a voice whose data did not
// change keeps its item (and so the focus, and a preview's status); a changed one is
// replaced in place, keeping those; one being edited is left alone until the edit ends.
const items = new Map();

function renderVoices() {
  const list = $("voice-list");
  const wanted = [];
  for (const voice of state.voices) {
    const key = JSON.stringify(voice);
    const known = items.get(voice.name);
    if (known && (known.key === key || known.element.querySelector(".edit-form:not([hidden])"))) {
      wanted.push(known.element);
      continue;
    }
    const element = voiceItem(voice);
    if (known) {
      element.querySelector(".preview-status").replaceWith(known.element.querySelector(".preview-status"));
      const focused = known.element.contains(document.activeElement) ? document.activeElement.classList[0] : null;
      known.element.replaceWith(element);
      if (focused) {
        const again = element.querySelector("." + focused);
        if (again && !again.hidden) again.focus();
      }
    }
    items.set(voice.name, { element, key });
    wanted.push(element);
  }
  const names = new Set(state.voices.map((voice) => voice.name));
  for (const name of [...items.keys()]) if (!names.has(name)) items.delete(name);
  if (!wanted.length) wanted.push(Object.assign(document.createElement("li"), { textContent: t("no_voices") }));
  const current = [...list.children];
  if (current.length !== wanted.length || current.some((element, index) => element !== wanted[index])) {
    list.replaceChildren(...wanted);
  }
}

function voiceItem(voice) {
  const item = $("voice-template").content.firstElementChild.cloneNode(true);
  applyStrings(item);
  item.dataset.voice = voice.name;
  item.querySelector(".voice-name").textContent = voice.name;
  item.querySelector(".default-badge").hidden = !voice.default;
  const description = item.querySelector(".voice-description");
  description.textContent = voice.description;
  description.hidden = !voice.description || voice.description === voice.name;
  const facts = [t("source_" + voice.kind), t("place_" + voice.source)];
  if (state.models.length > 1) facts.push(t("model_label", { model: voice.model }));
  facts.push(t("language_label", { languages: voice.languages.join(", ") }));
  facts.push(t("encoding_" + voice.encoding, { error: voice.error || "" }));
  const factsElement = item.querySelector(".voice-facts");
  factsElement.textContent = facts.join(" · ");
  factsElement.classList.toggle("failed", voice.encoding === "failed");
  const own = Object.entries(voice.settings).filter(([, value]) => value !== null && value !== undefined);
  item.querySelector(".voice-settings").textContent = own.length
    ? own.map(([key, value]) => t("setting_" + key + "_short", { value: number(value) })).join(", ")
    : t("settings_none");

  const buttons = {
    preview: item.querySelector(".preview"),
    edit: item.querySelector(".edit"),
    makeDefault: item.querySelector(".make-default"),
    remove: item.querySelector(".delete"),
  };
  buttons.preview.setAttribute("aria-label", t("preview_voice", { name: voice.name }));
  buttons.edit.setAttribute("aria-label", t("edit_voice", { name: voice.name }));
  buttons.makeDefault.setAttribute("aria-label", t("make_default_voice", { name: voice.name }));
  buttons.remove.setAttribute("aria-label", t("delete_voice", { name: voice.name }));
  buttons.edit.hidden = !voice.editable;
  buttons.makeDefault.hidden = voice.default || !voice.canBeDefault;
  buttons.remove.hidden = !voice.deletable;

  // The status is looked up at each click: a re-rendered item takes over its predecessor's
  // status element (and so a preview's progress), and this item's own is then gone.
  buttons.preview.addEventListener("click", () => player.play(voice, buttons.preview,
    item.querySelector(".preview-status")));
  buttons.makeDefault.addEventListener("click", () => makeDefault(voice));
  buttons.remove.addEventListener("click", () => confirmDelete(voice));

  const form = item.querySelector(".edit-form");
  form.dataset.voice = voice.name;
  // Default values, so that Cancel (form.reset) puts back what the server has.
  form.elements.description.defaultValue = voice.ownDescription;
  for (const [key, bounds] of Object.entries(state.settings)) {
    const input = form.elements[key];
    if (bounds.min !== null) input.min = bounds.min;
    if (bounds.max !== null) input.max = bounds.max;
    const value = voice.settings[key];
    input.defaultValue = value === null || value === undefined ? "" : value;
    input.placeholder = bounds.default === null ? t("setting_placeholder_model")
      : t("setting_placeholder", { value: number(bounds.default) });
  }
  item.querySelector(".save-edit").setAttribute("aria-label", t("save_voice", { name: voice.name }));
  buttons.edit.addEventListener("click", () => {
    form.hidden = false;
    buttons.edit.setAttribute("aria-expanded", "true");
    form.elements.description.focus();
  });
  item.querySelector(".cancel-edit").addEventListener("click", () => {
    form.reset();
    form.hidden = true;
    buttons.edit.setAttribute("aria-expanded", "false");
    buttons.edit.focus();
    refresh();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    saveEdit(voice, form);
  });
  return item;
}

async function afterChange(promise, message) {
  try {
    const result = await promise;
    say(message);
    watchAfterChange();
    show(result.state);
  } catch (problem) {
    complain(problem);
    if (problem.code === "changed" || problem.code === "voice_unknown") {
      for (const form of document.querySelectorAll(".edit-form")) form.hidden = true;
      await refresh();
    }
  }
}

function saveEdit(voice, form) {
  const body = { version: voice.version, description: form.elements.description.value };
  for (const key of Object.keys(state.settings)) {
    const text = form.elements[key].value.trim();
    body[key] = text === "" ? null : Number(text);
  }
  form.hidden = true;
  afterChange(api("PATCH", voicePath(voice), body), t("changed", { name: voice.name }));
}

function makeDefault(voice) {
  afterChange(api("POST", "api/default", { name: voice.name, version: voice.version }),
    t("default_set", { name: voice.name }));
}

function confirmDelete(voice) {
  const dialog = $("confirm-delete");
  $("confirm-text").textContent = t("confirm_delete", { name: voice.name });
  $("confirm-detail").textContent = voice.source === "folder" || voice.file
    ? t("confirm_delete_file", { file: voice.file || voice.name }) : t("confirm_delete_entry");
  dialog.returnValue = "";
  dialog.onclose = () => {
    if (dialog.returnValue === "delete") {
      const path = voicePath(voice) + "?version=" + encodeURIComponent(voice.version || "");
      afterChange(api("DELETE", path), t("deleted", { name: voice.name }));
    }
  };
  dialog.showModal();
  $("confirm-cancel").focus();
}

// -- previews: a WAV stream played through Web Audio as it arrives ------------------------

class Player {
  constructor() {
    this.context = null;
    this.abort = null;
  }

  async play(voice, button, status) {
    if (this.abort) this.abort.abort();
    const abort = new AbortController();
    this.abort = abort;
    if (!this.context) this.context = new AudioContext();
    await this.context.resume();
    const context = this.context;
    const text = $("preview-text").value.trim() || t("preview_default_text");
    const started = performance.now();
    status.textContent = t("preview_loading");
    status.dataset.state = "loading";
    delete status.dataset.played;
    button.disabled = true;
    let response;
    try {
      response = await fetch("api/preview", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", [settings.csrfHeader]: settings.csrf },
        body: JSON.stringify({ voice: voice.name, text }),
        signal: abort.signal,
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({ message: response.statusText }));
        throw new ApiProblem(response.status, body);
      }
      await this.stream(response.body.getReader(), context, status, started, abort);
    } catch (problem) {
      if (abort.signal.aborted) {
        status.textContent = t("preview_stopped");
        status.dataset.state = "stopped";
      } else {
        status.textContent = problem instanceof ApiProblem ? problemText(problem) : String(problem);
        status.dataset.state = "failed";
      }
    } finally {
      button.disabled = false;
    }
  }

  async stream(reader, context, status, started, abort) {
    let header = new Uint8Array(0);
    let format = null;
    let leftover = new Uint8Array(0);
    let next = 0;
    let first = null;
    let played = 0;
    let scheduled = 0;
    let peak = 0; // the loudest sample played: a preview of silence is not "played"
    const ended = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let bytes = value;
      if (!format) {
        header = concat(header, bytes);
        if (header.length < 44) continue;
        const view = new DataView(header.buffer, header.byteOffset, header.byteLength);
        format = { channels: view.getUint16(22, true), rate: view.getUint32(24, true), bits: view.getUint16(34, true) };
        bytes = header.subarray(44);
      }
      bytes = concat(leftover, bytes);
      const frameBytes = 2 * format.channels;
      const usable = bytes.length - (bytes.length % frameBytes);
      leftover = bytes.slice(usable);
      if (!usable) continue;
      const samples = new Int16Array(bytes.slice(0, usable).buffer);
      const frames = samples.length / format.channels;
      const buffer = context.createBuffer(format.channels, frames, format.rate);
      for (let channel = 0; channel < format.channels; channel++) {
        const data = buffer.getChannelData(channel);
        for (let i = 0; i < frames; i++) data[i] = samples[i * format.channels + channel] / 32768;
      }
      for (let i = 0; i < samples.length; i++) peak = Math.max(peak, Math.abs(samples[i]) / 32768);
      const source = context.createBufferSource();
      source.buffer = buffer;
      source.connect(context.destination);
      if (first === null) {
        first = (performance.now() - started) / 1000;
        next = context.currentTime + 0.1;
        status.textContent = t("preview_playing");
        status.dataset.state = "playing";
      }
      next = Math.max(next, context.currentTime + 0.02);
      source.start(next);
      next += buffer.duration;
      scheduled += 1;
      ended.push(new Promise((resolve) => {
        source.onended = () => {
          played += buffer.duration;
          resolve();
        };
      }));
      abort.signal.addEventListener("abort", () => source.stop(), { once: true });
    }
    await Promise.all(ended);
    if (abort.signal.aborted) throw new DOMException("stopped", "AbortError");
    status.dataset.played = played.toFixed(2);
    status.dataset.first = first === null ? "" : first.toFixed(2);
    status.dataset.buffers = String(scheduled);
    status.dataset.peak = peak.toFixed(3);
    status.dataset.state = "done";
    status.textContent = t("preview_done", { seconds: played.toFixed(1), first: (first || 0).toFixed(1) });
  }
}

function concat(a, b) {
  if (!a.length) return b;
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}

const player = new Player();

// -- recording and uploading --------------------------------------------------------------

class Recorder {
  constructor() {
    this.recorder = null;
    this.timer = null;
  }

  available() {
    return Boolean(navigator.mediaDevices && navigator.mediaDevices.getUserMedia && window.MediaRecorder);
  }

  async start() {
    if (!this.available()) {
      $("record-unavailable").hidden = false;
      return;
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false, channelCount: 1 },
      });
    } catch (error) {
      complain(t("record_denied", { error: error.message || error.name }));
      return;
    }
    const context = new AudioContext();
    const analyser = context.createAnalyser();
    analyser.fftSize = 2048;
    context.createMediaStreamSource(stream).connect(analyser);
    const types = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/mp4", "audio/webm"];
    const type = types.find((candidate) => MediaRecorder.isTypeSupported(candidate));
    const recorder = new MediaRecorder(stream, type ? { mimeType: type } : undefined);
    const chunks = [];
    recorder.ondataavailable = (event) => event.data.size && chunks.push(event.data);
    const started = performance.now();
    $("level").dataset.peak = "0";
    const samples = new Float32Array(analyser.fftSize);
    const limit = state ? state.limits.maxSeconds : 30;
    this.timer = setInterval(() => {
      analyser.getFloatTimeDomainData(samples);
      let sum = 0;
      for (const sample of samples) sum += sample * sample;
      const dbfs = 10 * Math.log10(sum / samples.length + 1e-12);
      const level = $("level");
      level.value = Math.min(1, Math.max(0, (dbfs + 60) / 60));
      level.dataset.peak = Math.max(Number(level.dataset.peak || 0), level.value).toFixed(2);
      const seconds = (performance.now() - started) / 1000;
      $("elapsed").textContent = clock(seconds) + " / " + clock(limit);
      if (seconds >= limit) this.stop();
    }, 100);
    recorder.onstop = () => {
      clearInterval(this.timer);
      stream.getTracks().forEach((track) => track.stop());
      context.close();
      $("level").value = 0;
      const seconds = (performance.now() - started) / 1000;
      const blob = new Blob(chunks, { type: recorder.mimeType || type || "audio/webm" });
      useTake({ blob, name: "recording" + extension(blob.type), seconds }, t("take_recorded", { seconds: seconds.toFixed(1) }));
    };
    this.recorder = recorder;
    recorder.start(250);
    $("record").disabled = true;
    $("stop").disabled = false;
    $("stop").focus();
  }

  stop() {
    if (this.recorder && this.recorder.state !== "inactive") this.recorder.stop();
    this.recorder = null;
    $("record").disabled = false;
    $("stop").disabled = true;
    $("record").focus();
  }
}

function clock(seconds) {
  const whole = Math.floor(seconds);
  return Math.floor(whole / 60) + ":" + String(whole % 60).padStart(2, "0");
}

function extension(type) {
  if (type.includes("ogg")) return ".ogg";
  if (type.includes("mp4")) return ".m4a";
  return ".webm";
}

const recorder = new Recorder();

async function useTake(newTake, info) {
  take = newTake;
  const audio = $("take");
  if (audio.src) URL.revokeObjectURL(audio.src);
  audio.src = URL.createObjectURL(take.blob);
  audio.hidden = false;
  $("take-info").textContent = info;
  const result = $("check-result");
  if (state && take.blob.size > state.limits.maxUploadBytes) {
    showCheck(null, { code: "too_large", values: { max_mb: Math.floor(state.limits.maxUploadBytes / 1048576) } });
    return;
  }
  result.textContent = t("checking");
  const form = new FormData();
  form.append("audio", take.blob, take.name);
  try {
    const answer = await api("POST", "api/check", form);
    showCheck(answer.check);
  } catch (problem) {
    showCheck(problem.body && problem.body.check, problem);
  }
}

function showCheck(check, problem) {
  const result = $("check-result");
  result.replaceChildren();
  result.dataset.ok = String(Boolean(check && check.ok));
  if (check && check.ok) {
    const line = document.createElement("p");
    line.className = "check-ok";
    line.textContent = t("check_ok", { seconds: check.seconds.toFixed(1), dbfs: Math.round(check.speech_dbfs) });
    result.append(line);
    return;
  }
  const heading = document.createElement("p");
  heading.textContent = t("check_bad");
  const list = document.createElement("ul");
  list.className = "problems";
  const problems = check ? check.problems : [];
  for (const item of problems) {
    const key = "problem_" + item.code;
    list.append(Object.assign(document.createElement("li"), { textContent: key in strings ? t(key, item.values) : item.message }));
  }
  if (!problems.length && problem) list.append(Object.assign(document.createElement("li"), { textContent: problemText(problem) }));
  result.append(heading, list);
}

async function saveVoice(event) {
  event.preventDefault();
  const name = $("new-name").value.trim();
  if (!name) {
    complain(t("need_name"));
    $("new-name").focus();
    return;
  }
  if (!take) {
    complain(t("need_audio"));
    $("record").focus();
    return;
  }
  const form = new FormData();
  form.append("name", name);
  form.append("description", $("new-description").value);
  form.append("model", $("new-model").value || "0");
  form.append("audio", take.blob, take.name);
  $("save").disabled = true;
  say(t("saving"));
  try {
    const answer = await api("POST", "api/voices", form);
    say(t("saved", { name: answer.name }));
    $("add-form").reset();
    take = null;
    $("take").hidden = true;
    $("take-info").textContent = "";
    $("check-result").replaceChildren();
    $("elapsed").textContent = "0:00";
    watchAfterChange();
    show(answer.state);
  } catch (problem) {
    if (problem.body && problem.body.check) showCheck(problem.body.check);
    complain(problem);
  } finally {
    $("save").disabled = false;
  }
}

// -- start --------------------------------------------------------------------------------

applyStrings(document);
document.title = t("title");
$("preview-text").value = t("preview_default_text");
$("record").addEventListener("click", () => recorder.start());
$("stop").addEventListener("click", () => recorder.stop());
$("upload").addEventListener("click", () => $("upload-file").click());
$("upload-file").addEventListener("change", () => {
  const file = $("upload-file").files[0];
  if (file) useTake({ blob: file, name: file.name, seconds: null }, t("take_file", { file: file.name }));
  $("upload-file").value = "";
});
$("add-form").addEventListener("submit", saveVoice);
if (!recorder.available()) {
  $("record").disabled = true;
  $("record-unavailable").hidden = false;
}
refresh();
