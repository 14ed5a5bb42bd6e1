package bmq.hdfs;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.SafeModeAction;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.apache.hadoop.hdfs.server.datanode.DataNode;

/**
 * A real HDFS on 127.0.0.1: Hadoop's MiniDFSCluster, one NameNode and N DataNodes in this JVM,
 * each with its own directories under --base-dir and its own ports.
 *
 * <p>Once every DataNode has registered it prints one line of JSON on stdout (and writes the same
 * to --info-file if given): {"namenode": "hdfs://127.0.0.1:PORT", "http": "127.0.0.1:PORT",
 * "datanodes": [{"index": 0, "xfer": "127.0.0.1:PORT", "ipc": "127.0.0.1:PORT", "http":
 * "127.0.0.1:PORT"}, ...]} (xfer: where clients write and read blocks; http: the web server, whose
 * /jmx has the DataNode's counters).
 *
 * <p>It runs until SIGTERM or SIGINT (Ctrl-C), which shut the cluster down. With --stdin-commands
 * (the tests') it also reads commands from stdin, one a line, answering each with one line of
 * JSON: "stop-datanode I" (DataNode I stops; the NameNode learns it only from missed heartbeats),
 * "restart-datanode I", "safemode enter|leave", "info"; it shuts down on "stop" and at the end
 * of its input, so the
 * cluster dies with whoever started it. (Without that flag stdin is left alone: a launcher in a
 * shell's background would be stopped by reading the terminal.)
 */
public final class MiniHdfs {
  private MiniHdfs() {}

  public static void main(String[] args) throws Exception {
    Path baseDir = null;
    Path infoFile = null;
    int dataNodes = 3;
    int nameNodePort = 0;
    long blockSize = 0;
    boolean stdinCommands = false;
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--stdin-commands")) {
        stdinCommands = true;
        continue;
      }
      String value = i + 1 < args.length ? args[i + 1] : null;
      switch (args[i]) {
        case "--base-dir" -> baseDir = Path.of(required(args[i], value));
        case "--info-file" -> infoFile = Path.of(required(args[i], value));
        case "--datanodes" -> dataNodes = Integer.parseInt(required(args[i], value));
        case "--port" -> nameNodePort = Integer.parseInt(required(args[i], value));
        case "--block-size" -> blockSize = Long.parseLong(required(args[i], value));
        default -> usage("unknown argument " + args[i]);
      }
      i++;
    }
    if (baseDir == null) {
      usage("--base-dir is required");
    }
    // The daemons log on stderr (slf4j-simple), warnings and errors unless -Dorg.slf4j.simpleLogger
    // .defaultLogLevel says otherwise; stdout carries only the lines this launcher promises.
    if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
      System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    }
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    System.setOut(System.err);

    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, baseDir.toAbsolutePath().toString());
    conf.set(DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_KEY, "127.0.0.1:0");
    // Appends to files (BMQ's segments grow in place) and the shortest heartbeats: a killed
    // DataNode is seen as dead in seconds, not 10 minutes.
    conf.setBoolean("dfs.support.append", true);
    conf.setInt(DFSConfigKeys.DFS_HEARTBEAT_INTERVAL_KEY, 1);
    conf.setInt(DFSConfigKeys.DFS_NAMENODE_HEARTBEAT_RECHECK_INTERVAL_KEY, 3000);
    // A DataNode silent for 3 heartbeats is stale: new blocks and reads avoid it long before it
    // is declared dead (what HBase asks of production clusters too). Without it a stopped
    // DataNode keeps being put in new write pipelines, where hdfs-native's writer can hang.
    conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_AVOID_STALE_DATANODE_FOR_WRITE_KEY, true);
    conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_AVOID_STALE_DATANODE_FOR_READ_KEY, true);
    conf.setLong(DFSConfigKeys.DFS_NAMENODE_STALE_DATANODE_INTERVAL_KEY, 3000);
    conf.setBoolean(DFSConfigKeys.DFS_PERMISSIONS_ENABLED_KEY, true);
    conf.setInt("dfs.namenode.file.close.num-committed-allowed", 1);
    if (blockSize > 0) {
      conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
      conf.setLong(DFSConfigKeys.DFS_BLOCK_SIZE_KEY, blockSize);
    }
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf, new File(baseDir.toString()))
        .numDataNodes(dataNodes)
        .nameNodePort(nameNodePort)
        .format(true)
        .build();
    cluster.waitActive();
    Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown, "mini-hdfs-shutdown"));

    String info = info(cluster);
    if (infoFile != null) {
      // Written whole and then renamed: a reader never sees half of it.
      Path tmp = infoFile.resolveSibling(infoFile.getFileName() + ".tmp");
      Files.writeString(tmp, info + "\n");
      Files.move(tmp, infoFile, StandardCopyOption.REPLACE_EXISTING,
          StandardCopyOption.ATOMIC_MOVE);
    }
    out.println(info);
    if (!stdinCommands) {
      Thread.currentThread().join();   // until a signal runs the shutdown hook
    }

    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] words = line.trim().split("\\s+");
      try {
        switch (words[0]) {
          case "stop" -> {
            cluster.shutdown();
            out.println("{\"stopped\": true}");
            System.exit(0);
          }
          case "info" -> out.println(info(cluster));
          case "stop-datanode" -> {
            cluster.stopDataNode(Integer.parseInt(words[1]));
            out.println(info(cluster));
          }
          case "safemode" -> {
            // "safemode enter" / "safemode leave": the NameNode refuses every change meanwhile
            cluster.getFileSystem().setSafeMode(words[1].equals("enter")
                ? SafeModeAction.ENTER : SafeModeAction.LEAVE);
            out.println("{\"safemode\": \"" + words[1] + "\"}");
          }
          case "space-quota" -> {
            // "space-quota PATH BYTES": the most the directory's files may take (replicas
            // counted), "space-quota PATH -1" clears it. Past it, new blocks are refused
            // (DSQuotaExceededException): a full HDFS, as far as a client can tell.
            long bytes = Long.parseLong(words[2]);
            cluster.getFileSystem().setQuota(new org.apache.hadoop.fs.Path(words[1]),
                HdfsConstants.QUOTA_DONT_SET, bytes < 0 ? HdfsConstants.QUOTA_RESET : bytes);
            out.println("{\"space-quota\": " + bytes + "}");
          }
          case "stop-namenode" -> {
            // The NameNode goes away (its RPC port refuses), the DataNodes keep running.
            cluster.shutdownNameNode(0);
            out.println("{\"namenode\": \"stopped\"}");
          }
          case "restart-namenode" -> {
            // Back on the same RPC port, from its own metadata; waits for the DataNodes.
            cluster.restartNameNode(0, true);
            out.println(info(cluster));
          }
          case "restart-datanode" -> {
            cluster.restartDataNode(Integer.parseInt(words[1]), true);
            cluster.waitActive();
            out.println(info(cluster));
          }
          case "" -> { }
          default -> out.println("{\"error\": \"unknown command " + words[0] + "\"}");
        }
      } catch (IOException | RuntimeException e) {
        out.println("{\"error\": \"" + String.valueOf(e.getMessage()).replace("\"", "'") + "\"}");
      }
    }
    // End of input: whoever started us is gone. The shutdown hook stops the cluster.
    System.exit(0);
  }

  private static String info(MiniDFSCluster cluster) {
    List<String> nodes = new ArrayList<>();
    List<DataNode> running = cluster.getDataNodes();
    for (int i = 0; i < running.size(); i++) {
      DataNode node = running.get(i);
      nodes.add(String.format("{\"index\": %d, \"xfer\": \"127.0.0.1:%d\", \"ipc\": "
          + "\"127.0.0.1:%d\", \"http\": \"127.0.0.1:%d\"}", i, node.getXferPort(),
          node.getIpcPort(), node.getInfoPort()));
    }
    return String.format("{\"namenode\": \"hdfs://127.0.0.1:%d\", \"http\": \"127.0.0.1:%d\", "
        + "\"datanodes\": [%s]}", cluster.getNameNodePort(),
        cluster.getNameNode().getHttpAddress().getPort(), String.join(", ", nodes));
  }

  private static String required(String flag, String value) {
    if (value == null) {
      usage(flag + " needs a value");
    }
    return value;
  }

  private static void usage(String problem) {
    System.err.println("mini-hdfs: " + problem);
    System.err.println("usage: MiniHdfs --base-dir DIR [--info-file FILE] [--datanodes N] "
        + "[--port P] [--block-size BYTES] [--stdin-commands]");
    System.exit(2);
  }
}
