// Lets Material's search run on a page opened from file://, where Chromium refuses
// `new Worker(url)`. Written for reportgen. The worker script runs in a hidden
// iframe that shares the page's origin (srcdoc); messages cross both ways as
// MessageEvents, which is all Material's search needs (postMessage + "message").
(function () {
  "use strict";
  if (location.protocol !== "file:") return;
  var NativeWorker = window.Worker;

  function FileWorker(url) {
    // A worker from a Blob the page made (the "Your sentence" page's model: live-page.js) does start from
    // file://, and must: it runs off the page's thread, which this frame would not.
    if (NativeWorker && /^blob:/.test(String(url))) return new NativeWorker(url);
    var target = new EventTarget();
    var queue = [];
    var frameWindow = null;
    var frame = document.createElement("iframe");
    var src = new URL(url, document.baseURI).href.replace(/"/g, "%22");

    function deliver(win, data) {
      win.dispatchEvent(new win.MessageEvent("message", { data: data }));
    }
    target.postMessage = function (data) {
      if (frameWindow) deliver(frameWindow, data);
      else queue.push(data);
    };
    target.terminate = function () { frame.remove(); };
    target.addEventListener("message", function (event) {
      if (typeof target.onmessage === "function") target.onmessage(event);
    });
    frame.hidden = true;
    frame.setAttribute("aria-hidden", "true");
    // Only a script file in the frame: it inherits the page's policy, which runs no inline script.
    // The worker script answers only messages, which are delivered after the load, so its replies
    // find postMessage already pointing back here.
    frame.srcdoc = "<!doctype html><script src=\"" + src + "\"><\/script>";
    frame.addEventListener("load", function () {
      frameWindow = frame.contentWindow;
      frameWindow.postMessage = function (data) { window.__rgWorkerReply(frame, data); };
      queue.splice(0).forEach(function (data) { deliver(frameWindow, data); });
    });
    frame.rgWorker = target;
    (document.body || document.documentElement).appendChild(frame);
    return target;
  }

  window.__rgWorkerReply = function (frame, data) {
    frame.rgWorker.dispatchEvent(new MessageEvent("message", { data: data }));
  };
  window.Worker = FileWorker;
})();
