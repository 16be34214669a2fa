// Lets Material's search run on a page opened from file://, where Chromium refuses
// `new Worker(url)`. Written for reportgen. The worker script runs in a hidden
// iframe that shares the page's origin (srcdoc); messages cross both ways as
// MessageEvents, which is all Material's search needs (postMessage + "message").
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  function FileWorker(url) {
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
    frame.srcdoc = "<!doctype html><script>window.postMessage = function (data) {" +
      " parent.__rgWorkerReply(frameElement, data); };<\/script>" +
      "<script src=\"" + src + "\"><\/script>";
    frame.addEventListener("load", function () {
      frameWindow = frame.contentWindow;
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
